# Kernel instance sources for one backend ("cuda" -> kernels/*.cu, "hip" -> kernels/*.hip,
# each .hip including its .cu twin). Each instance file only instantiates device templates of
# include/packfa/device/. The head dims come from the instance table itself
# (include/packfa/device/fa_instances.hpp, kHeadDims): one unit kernels/fa_d<D>.cu per entry.
# PACKFA_INSTANCES=lean (CI) keeps every head dim but compiles fewer variants per head dim
# (fa_in_lean_set() in the same header).
set(PACKFA_INSTANCE_TABLE ${PROJECT_SOURCE_DIR}/include/packfa/device/fa_instances.hpp)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PACKFA_INSTANCE_TABLE})

# PACKFA_HEAD_DIMS: the table's head dims, as a CMake list.
function(packfa_read_head_dims out)
  file(STRINGS ${PACKFA_INSTANCE_TABLE} line REGEX "^constexpr int kHeadDims\\[\\] = {[0-9, ]+};")
  if(NOT line MATCHES "{([0-9, ]+)}")
    message(FATAL_ERROR "packfa: no 'constexpr int kHeadDims[] = {...};' line in ${PACKFA_INSTANCE_TABLE}")
  endif()
  string(REGEX REPLACE "[ ]*,[ ]*" ";" dims "${CMAKE_MATCH_1}")
  string(STRIP "${dims}" dims)
  set(${out} ${dims} PARENT_SCOPE)
endfunction()
packfa_read_head_dims(PACKFA_HEAD_DIMS)

# kernels/<stem><D>.<ext> for every table head dim, each followed by kernels/<stem><D><suffix>.<ext>
# for every further argument; a missing unit names the line it should hold (macro(D)).
function(packfa_head_dim_units backend stem macro out)
  if(backend STREQUAL "cuda")
    set(ext cu)
  else()
    set(ext hip)
  endif()
  set(srcs)
  foreach(d ${PACKFA_HEAD_DIMS})
    set(src ${PROJECT_SOURCE_DIR}/kernels/${stem}${d}.${ext})
    if(NOT EXISTS ${src})
      message(FATAL_ERROR "packfa: the instance table lists head dim ${d}; add ${src} "
        "(kernels/${stem}${d}.cu: ${macro}(${d}); kernels/${stem}${d}.hip: #include \"${stem}${d}.cu\")")
    endif()
    list(APPEND srcs ${src})
    foreach(suffix ${ARGN})
      list(APPEND srcs ${PROJECT_SOURCE_DIR}/kernels/${stem}${d}${suffix}.${ext})
    endforeach()
  endforeach()
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()

# Instance units only (kernels/fa_d<D>.<ext> and fa_d<D>_paged.<ext> for every table head dim).
function(packfa_fa_unit_sources backend out)
  packfa_head_dim_units(${backend} fa_d PACKFA_FA_UNIT srcs _paged)
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()

# Warp-MMA prefill units (kernels/fa_prefill_mma_d<D>.<ext>, device/fa/prefill_mma.hpp), one per
# table head dim: CUDA for every architecture of the library (the kernel traps below sm_80, where
# the dispatcher never selects it), HIP for every gfx target.
function(packfa_prefill_mma_sources backend out)
  packfa_head_dim_units(${backend} fa_prefill_mma_d PACKFA_FA_PREFILL_MMA_UNIT srcs)
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()

# Compiles the units in ARGN for the instance set `set`: lean, demo (`./packfa demo` on a GPU:
# the demo's two kernels) or all (no definition).
function(packfa_instance_set set)
  if(set STREQUAL "lean")
    set_source_files_properties(${ARGN} PROPERTIES COMPILE_DEFINITIONS PACKFA_LEAN_INSTANCES=1)
  elseif(set STREQUAL "demo")
    set_source_files_properties(${ARGN} PROPERTIES COMPILE_DEFINITIONS PACKFA_DEMO_INSTANCES=1)
  endif()
endfunction()

# Every kernel source of the library: instance units, probe, pack, combine, warp-MMA prefill.
function(packfa_kernel_sources backend out)
  packfa_fa_unit_sources(${backend} srcs)
  if(backend STREQUAL "cuda")
    set(ext cu)
  else()
    set(ext hip)
  endif()
  list(APPEND srcs ${PROJECT_SOURCE_DIR}/kernels/probe.${ext} ${PROJECT_SOURCE_DIR}/kernels/pack.${ext}
    ${PROJECT_SOURCE_DIR}/kernels/combine.${ext})
  packfa_instance_set(${PACKFA_INSTANCES} ${srcs})
  # The warp-MMA prefill units follow PACKFA_INSTANCES unless PACKFA_PREFILL_MMA_INSTANCES says
  # otherwise (e.g. a lean library with every prefill_mma instance, to test that kernel alone).
  packfa_prefill_mma_sources(${backend} mma)
  set(mma_set ${PACKFA_INSTANCES})
  if(PACKFA_PREFILL_MMA_INSTANCES)
    set(mma_set ${PACKFA_PREFILL_MMA_INSTANCES})
  endif()
  packfa_instance_set(${mma_set} ${mma})
  list(APPEND srcs ${mma})
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()

# Prefill units (kernels/fa_prefill_d<D>.cu): Hopper wgmma, compiled for sm_90a only, into an
# object library the CUDA library links. Built when the CUDA architectures include 90 (or
# "native" on a machine whose GPU is 9.0). $out: the object library's name, or empty.
function(packfa_prefill_objects out)
  set(${out} "" PARENT_SCOPE)
  set(want OFF)
  foreach(a ${CMAKE_CUDA_ARCHITECTURES})
    if(a MATCHES "^90")
      set(want ON)
    elseif(a STREQUAL "native" OR a STREQUAL "all" OR a STREQUAL "all-major")
      execute_process(COMMAND nvidia-smi --query-gpu=compute_cap --format=csv,noheader
        OUTPUT_VARIABLE caps ERROR_QUIET RESULT_VARIABLE rc)
      if(rc EQUAL 0 AND caps MATCHES "9\\.0")
        set(want ON)
      endif()
    endif()
  endforeach()
  if(NOT want OR PACKFA_INSTANCES STREQUAL "demo")
    return()
  endif()
  packfa_head_dim_units(cuda fa_prefill_d PACKFA_FA_PREFILL_UNIT srcs)
  add_library(packfa_prefill OBJECT ${srcs})
  set_target_properties(packfa_prefill PROPERTIES CUDA_ARCHITECTURES 90a-real POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(packfa_prefill PRIVATE packfa_headers)
  target_compile_definitions(packfa_prefill PRIVATE PACKFA_HAS_CUDA=1 PACKFA_PDL=1
    $<$<STREQUAL:${PACKFA_INSTANCES},lean>:PACKFA_LEAN_INSTANCES=1>)
  target_compile_options(packfa_prefill PRIVATE --expt-relaxed-constexpr -Xptxas=-warn-spills)
  set(${out} packfa_prefill PARENT_SCOPE)
endfunction()
