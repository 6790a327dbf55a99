# The package that generated programs build against: their CMakeLists.txt
# (written by --pp-emit-program) calls find_package(PPRuntime) with this
# build's runtime directory as a hint.
if(TARGET pp_train)
  set(PP_EXPORTED pp_runtime pp_train pp_train_onnx)
  foreach(target pp_runtime_mpi pp_runtime_cuda pp_train_cuda pp_runtime_nccl)
    if(TARGET ${target})
      list(APPEND PP_EXPORTED ${target})
    endif()
  endforeach()
  export(TARGETS ${PP_EXPORTED} NAMESPACE PPRuntime::
    FILE ${CMAKE_CURRENT_BINARY_DIR}/PPRuntimeTargets.cmake)
  set(PP_EXPORT_MPI ${MPI_CXX_FOUND})
  if(TARGET pp_runtime_cuda)
    set(PP_EXPORT_CUDA ON)
  else()
    set(PP_EXPORT_CUDA OFF)
  endif()
  configure_file(${CMAKE_CURRENT_LIST_DIR}/PPRuntimeConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/PPRuntimeConfig.cmake @ONLY)
endif()
