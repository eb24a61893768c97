# PDL benchmarks (docs/pdl.md). Included from bench/CMakeLists.txt:
#   include(${CMAKE_CURRENT_SOURCE_DIR}/pdl.cmake OPTIONAL)
#   pdl_chain  8a: chain of tiny kernels: stream / stream+PDL / graph / graph+PDL, trigger start/end
#   pdl_tune   8b: trigger-placement tuner
# Both take --json PATH; exit 77 without a GPU. Commit: env PACKFA_COMMIT at run time, else the
# git revision at configure time.
if(NOT DEFINED PACKFA_GIT_COMMIT OR NOT PACKFA_GIT_COMMIT)
  execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    OUTPUT_VARIABLE PACKFA_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT PACKFA_GIT_COMMIT)
    set(PACKFA_GIT_COMMIT unknown)
  endif()
endif()

# PDL needs sm_90 code: add 90 to the project's list when it is missing.
set(_pdl_bench_archs ${CMAKE_CUDA_ARCHITECTURES})
if(NOT _pdl_bench_archs MATCHES "^(all|all-major|native)$" AND NOT _pdl_bench_archs MATCHES "(^|;)90")
  list(APPEND _pdl_bench_archs 90)
endif()

foreach(_b pdl_chain pdl_tune)
  add_executable(${_b} ${CMAKE_CURRENT_LIST_DIR}/${_b}.cu)
  target_link_libraries(${_b} PRIVATE packfa)
  target_include_directories(${_b} PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  target_compile_definitions(${_b} PRIVATE PACKFA_PDL=1 PACKFA_GIT_COMMIT="${PACKFA_GIT_COMMIT}")
  target_compile_options(${_b} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  set_target_properties(${_b} PROPERTIES CUDA_ARCHITECTURES "${_pdl_bench_archs}")
endforeach()
