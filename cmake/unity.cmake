include_guard(GLOBAL)
# Note [unity builds]: most of a translation unit's compile time here is
# headers it shares with its neighbours: <torch/torch.h> and c10d's (~20 s
# of CPU each, against 1-5 s for our own code), and for the library and its
# unit tests the standard library, fmt, spdlog and GoogleTest. The
# library's layers, the unit tests and the targets with several libtorch
# units (the adapter, the Python torch module, the torch tests) are unity
# builds in batches of 8: the headers are parsed once per batch. Measured
# (CPU, ASan build): the 39 unit test files 341 s one by one, 65 % of it in
# batches. Files of a batch share one translation unit, so helpers in
# anonymous namespaces must have names of their own within their target
# (the build fails on a clash; it never picks the wrong one silently). The
# kernels layer is left out: its files are compiled per instruction set
# with flags of their own. GRADWIRE_UNITY=OFF compiles each file alone
# (faster to rebuild after editing one file).
option(GRADWIRE_UNITY "Unity builds (batches of 8 files) for the library, unit tests and libtorch code" ON)
function(gradwire_unity target)
  if(GRADWIRE_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    # A class of one file whose member uses that file's anonymous namespace
    # is fine alone; in a batch, GCC warns that it is not the main file.
    target_compile_options(${target} PRIVATE
      $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-subobject-linkage>)
  endif()
endfunction()
