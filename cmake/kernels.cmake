# Kernel instance sources for one backend ("cuda" -> kernels/*.cu, "hip" -> kernels/*.hip).
# Each instance file only instantiates device templates of include/packfa/device/.
# PACKFA_INSTANCES=lean (CI) keeps every head dim but compiles fewer variants per head dim;
# PACKFA_INSTANCES=demo (`./packfa demo` on a GPU) registers only the two D = 128 kernels the
# demo calls, the other head-dim units compile to empty registrations (the dispatcher still
# links them and answers "not compiled" for the rest). See include/packfa/device/fa_instances.hpp.
function(packfa_kernel_sources backend out)
  if(backend STREQUAL "cuda")
    set(ext cu)
  else()
    set(ext hip)
  endif()
  set(srcs)
  foreach(d 64 80 96 112 128 256)
    list(APPEND srcs ${PROJECT_SOURCE_DIR}/kernels/fa_d${d}.${ext} ${PROJECT_SOURCE_DIR}/kernels/fa_d${d}_paged.${ext})
  endforeach()
  list(APPEND srcs ${PROJECT_SOURCE_DIR}/kernels/probe.${ext} ${PROJECT_SOURCE_DIR}/kernels/pack.${ext}
    ${PROJECT_SOURCE_DIR}/kernels/combine.${ext})
  if(PACKFA_INSTANCES STREQUAL "lean")
    set_source_files_properties(${srcs} PROPERTIES COMPILE_DEFINITIONS PACKFA_LEAN_INSTANCES=1)
  elseif(PACKFA_INSTANCES STREQUAL "demo")
    set_source_files_properties(${srcs} PROPERTIES COMPILE_DEFINITIONS PACKFA_DEMO_INSTANCES=1)
  endif()
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()
