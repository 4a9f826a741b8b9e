# gradwire_libtorch without TorchConfig.cmake (included from
# python/CMakeLists.txt): libtorch's include directories and CPU libraries as
# the Python package gives them, for builds where find_package(Torch) did
# not run or failed (a build without a CUDA toolkit, such as
# `pip install ./python`: Note [finding libtorch]) but the Python extension
# needs the adapter library. The C++ examples and tests, and the adapter's
# CMake package, stay with GRADWIRE_HAVE_TORCH (torch.cmake).
#
#   gradwire_libtorch_from_python(<torch lib dir> <include dirs...>)
function(gradwire_libtorch_from_python torch_lib)
  add_library(gradwire_libtorch INTERFACE)
  target_include_directories(gradwire_libtorch SYSTEM INTERFACE ${ARGN})
  target_link_libraries(gradwire_libtorch INTERFACE ${torch_lib}/libtorch_cpu.so ${torch_lib}/libc10.so)
  # torch's wheels use the C++11 std::string ABI, as gradwire's core does
  # (python/CMakeLists.txt checks it before calling this).
  target_compile_definitions(gradwire_libtorch INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
  # Line tables only in RelWithDebInfo (Note [line tables for libtorch code] in torch.cmake).
  target_compile_options(gradwire_libtorch INTERFACE $<BUILD_INTERFACE:$<$<CONFIG:RelWithDebInfo>:-g1>>)
endfunction()
