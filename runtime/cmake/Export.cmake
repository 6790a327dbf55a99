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
  # MPI and OpenMP as this build found them, recreated by the package
  # instead of found again: FindMPI and FindOpenMP compile test programs,
  # about 3 of the 4 s a generated program's configure took.
  set(PP_RECORDED_TARGETS "")
  foreach(target MPI::MPI_CXX OpenMP::OpenMP_CXX)
    if(TARGET ${target})
      string(APPEND PP_RECORDED_TARGETS
        "if(NOT TARGET ${target})\n"
        "  add_library(${target} INTERFACE IMPORTED)\n")
      foreach(property INTERFACE_INCLUDE_DIRECTORIES
          INTERFACE_COMPILE_DEFINITIONS INTERFACE_COMPILE_OPTIONS
          INTERFACE_LINK_OPTIONS INTERFACE_LINK_LIBRARIES)
        get_target_property(value ${target} ${property})
        if(value)
          string(APPEND PP_RECORDED_TARGETS
            "  set_property(TARGET ${target} PROPERTY ${property}\n"
            "    [==[${value}]==])\n")
        endif()
      endforeach()
      string(APPEND PP_RECORDED_TARGETS "endif()\n")
    endif()
  endforeach()
  if(TARGET pp_runtime_cuda)
    set(PP_EXPORT_CUDA ON)
  else()
    set(PP_EXPORT_CUDA OFF)
  endif()
  configure_file(${CMAKE_CURRENT_LIST_DIR}/PPRuntimeConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/PPRuntimeConfig.cmake @ONLY)
endif()
