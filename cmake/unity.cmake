include_guard(GLOBAL)
# Note [unity builds of libtorch code]: most of the compile time of a
# translation unit that includes libtorch is the headers (<torch/torch.h>
# and c10d's: ~20 s of CPU each here, against 1-5 s for our own code), and
# a build compiles dozens of such units. The targets with several of them
# (the adapter, the Python torch module, the torch tests) are unity builds
# in batches of 8: the headers are parsed once per batch. Two batches of
# the adapter's 15 files still keep both cores of a 2-core machine busy.
# GRADWIRE_UNITY_TORCH=OFF compiles each file alone (faster to rebuild
# after editing one file).
option(GRADWIRE_UNITY_TORCH "Unity builds for the targets that include libtorch" ON)
function(gradwire_unity target)
  if(GRADWIRE_UNITY_TORCH)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
