# Appends to the global PP_RECORDED_TEXT the CMake that recreates the
# imported target `target` of a dependency (after the targets it links):
# its file, include directories, options and links, as found here.
function(pp_record_imported_target target)
  get_property(recorded GLOBAL PROPERTY PP_RECORDED_NAMES)
  if(NOT TARGET ${target} OR "${target}" IN_LIST recorded)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY PP_RECORDED_NAMES ${target})
  get_target_property(links ${target} INTERFACE_LINK_LIBRARIES)
  if(links)
    foreach(link IN LISTS links)
      if(TARGET "${link}")
        pp_record_imported_target(${link})
      endif()
    endforeach()
  endif()
  get_target_property(type ${target} TYPE)
  set(text "if(NOT TARGET ${target})\n")
  if(type STREQUAL "INTERFACE_LIBRARY")
    string(APPEND text "  add_library(${target} INTERFACE IMPORTED)\n")
  else()
    get_target_property(location ${target} LOCATION)
    string(APPEND text "  add_library(${target} UNKNOWN IMPORTED)\n"
      "  set_property(TARGET ${target} PROPERTY IMPORTED_LOCATION\n"
      "    [==[${location}]==])\n")
  endif()
  foreach(property INTERFACE_INCLUDE_DIRECTORIES
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES INTERFACE_COMPILE_DEFINITIONS
      INTERFACE_COMPILE_OPTIONS INTERFACE_LINK_OPTIONS
      INTERFACE_LINK_DIRECTORIES INTERFACE_LINK_LIBRARIES)
    get_target_property(value ${target} ${property})
    if(value)
      string(APPEND text
        "  set_property(TARGET ${target} PROPERTY ${property}\n"
        "    [==[${value}]==])\n")
    endif()
  endforeach()
  string(APPEND text "endif()\n")
  set_property(GLOBAL APPEND_STRING PROPERTY PP_RECORDED_TEXT "${text}")
endfunction()

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
  # The dependencies' targets as this build found them, recreated by the
  # package instead of found again: FindMPI, FindOpenMP, FindThreads and
  # oneDNN's FindOpenCL compile test programs and FindCUDAToolkit runs nvcc,
  # about 3.5 of the 4 s a generated program's configure took.
  foreach(target Threads::Threads MPI::MPI_CXX OpenMP::OpenMP_CXX DNNL::dnnl
      CUDA::cudart CUDA::cublas)
    pp_record_imported_target(${target})
  endforeach()
  get_property(PP_RECORDED_TARGETS GLOBAL PROPERTY PP_RECORDED_TEXT)
  if(TARGET pp_runtime_cuda)
    set(PP_EXPORT_CUDA ON)
  else()
    set(PP_EXPORT_CUDA OFF)
  endif()
  configure_file(${CMAKE_CURRENT_LIST_DIR}/PPRuntimeConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/PPRuntimeConfig.cmake @ONLY)
endif()
