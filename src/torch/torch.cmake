# Finds libtorch for the adapter (included from the top-level CMakeLists.txt).
# Sets GRADWIRE_HAVE_TORCH and defines the INTERFACE target gradwire_libtorch
# (include directories, flags and the CPU libraries of libtorch).
#
# Note [finding libtorch]: libtorch comes from PyPI's torch wheel; its CMake
# package lives at torch.utils.cmake_prefix_path. Two quirks of that package:
#  * the wheel is a CUDA build, so TorchConfig.cmake requires a CUDA toolkit
#    (it calls enable_language(CUDA) and fails without one) and, unless
#    TORCH_CUDA_ARCH_LIST is set, compiles and runs a program to detect GPUs,
#    which fails on a machine without one. We require the toolkit that the
#    core build found (GRADWIRE_HAVE_CUDA) and pass our CUDA architectures.
#  * it overrides CMAKE_CUDA_ARCHITECTURES and other variables; we call it
#    inside a function so none of that leaks into the rest of the build.
# The adapter handles host tensors only (so far), so we link libtorch_cpu and
# libc10 and not TORCH_LIBRARIES: the latter adds libtorch_cuda, NCCL and
# /usr/local/cuda's libraries to the link, and the linker then resolves
# libtorch_cuda's NCCL against /usr/local/cuda's older copy instead of the
# nvidia-nccl wheel it was built for (undefined ncclComm* symbols).
# libtorch_cpu.so still loads libcudart/libcupti at run time, from the
# nvidia-* wheels through its own RPATH; no GPU is needed.

set(GRADWIRE_HAVE_TORCH OFF)

function(gradwire_find_torch)
  set(required OFF)
  if(GRADWIRE_WITH_TORCH STREQUAL "ON")
    set(required ON)
  elseif(NOT GRADWIRE_WITH_TORCH STREQUAL "AUTO")
    message(FATAL_ERROR "GRADWIRE_WITH_TORCH must be AUTO, ON or OFF, not '${GRADWIRE_WITH_TORCH}'")
  endif()
  macro(skip why)
    if(required)
      message(FATAL_ERROR "GRADWIRE_WITH_TORCH=ON but ${why}")
    endif()
    message(STATUS "gradwire: libtorch adapter OFF (${why})")
    return()
  endmacro()

  if(GRADWIRE_SANITIZE AND NOT required)
    # libtorch is not instrumented; the sanitizer build is for the core.
    skip("sanitizer build; pass -DGRADWIRE_WITH_TORCH=ON to force")
  endif()
  find_program(GRADWIRE_PYTHON NAMES python3 python)
  if(NOT GRADWIRE_PYTHON)
    skip("no python3 to locate torch")
  endif()
  execute_process(
    COMMAND ${GRADWIRE_PYTHON} -c
      "import torch; print(torch.utils.cmake_prefix_path); print(torch.version.cuda or ''); print(torch.__version__)"
    OUTPUT_VARIABLE out ERROR_QUIET RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    skip("'${GRADWIRE_PYTHON} -c \"import torch\"' failed; run scripts/install-torch")
  endif()
  string(REPLACE "\n" ";" out "${out}")
  list(GET out 0 prefix)
  list(GET out 1 torch_cuda)
  list(GET out 2 torch_version)
  if(torch_cuda AND NOT GRADWIRE_HAVE_CUDA)
    skip("torch ${torch_version} is a CUDA ${torch_cuda} build, whose CMake package needs a CUDA toolkit (none found; Note [finding libtorch])")
  endif()
  if(NOT TORCH_CUDA_ARCH_LIST)
    # "80;90" -> "8.0;9.0": no GPU detection at configure time.
    set(TORCH_CUDA_ARCH_LIST "")
    foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
      string(REGEX REPLACE "^([0-9]+)([0-9])[a-z]*$" "\\1.\\2" dotted "${arch}")
      list(APPEND TORCH_CUDA_ARCH_LIST "${dotted}")
    endforeach()
    if(NOT TORCH_CUDA_ARCH_LIST)
      set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
    endif()
  endif()
  # Ours are already in TORCH_CUDA_ARCH_LIST; torch would only warn that it
  # ignores them (and set them OFF, in this function's scope).
  unset(CMAKE_CUDA_ARCHITECTURES)
  list(PREPEND CMAKE_PREFIX_PATH "${prefix}")
  find_package(Torch QUIET)
  if(NOT Torch_FOUND)
    skip("find_package(Torch) failed with prefix ${prefix}")
  endif()
  if(NOT TARGET torch_cpu_library OR NOT TARGET c10)
    skip("the Torch package lacks the torch_cpu_library/c10 targets")
  endif()

  add_library(gradwire_libtorch INTERFACE)
  target_include_directories(gradwire_libtorch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
  target_link_libraries(gradwire_libtorch INTERFACE torch_cpu_library c10)
  if(TORCH_CXX_FLAGS)
    separate_arguments(flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
    target_compile_options(gradwire_libtorch INTERFACE ${flags})
  endif()
  # Note [line tables for libtorch code]: in RelWithDebInfo, code that
  # includes libtorch's headers keeps line tables only (-g1, which overrides
  # the configuration's -g): full DWARF for the thousands of libtorch
  # templates each such file instantiates was about 37 % of its compile time
  # (c10d_ops.cpp: 35 s of CPU with -g, 22 s with -g1; a precompiled
  # <torch/torch.h> saved only 2 s more), and the torch files are half of a
  # fresh build's CPU time. Backtraces and perf keep file and line; gdb loses
  # local variables in these files only (build with CMAKE_BUILD_TYPE=Debug to
  # get them back). BUILD_INTERFACE: installed consumers keep their own flags.
  target_compile_options(gradwire_libtorch INTERFACE $<BUILD_INTERFACE:$<$<CONFIG:RelWithDebInfo>:-g1>>)
  # gradwire's core is built with the compiler's default C++ ABI; the wheel
  # must match it or std::string crosses the boundary in two layouts.
  execute_process(COMMAND ${GRADWIRE_PYTHON} -c "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
    OUTPUT_VARIABLE abi OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT abi STREQUAL "1")
    skip("torch ${torch_version} uses the pre-C++11 std::string ABI; gradwire needs the new one")
  endif()
  message(STATUS "gradwire: libtorch adapter ON (torch ${torch_version} from ${prefix})")
  set(GRADWIRE_HAVE_TORCH ON PARENT_SCOPE)
  set(GRADWIRE_TORCH_VERSION ${torch_version} PARENT_SCOPE)
endfunction()

gradwire_find_torch()
