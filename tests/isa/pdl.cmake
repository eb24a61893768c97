# PDL static race detector (tests/isa/ptx_pdl_check.py, docs/pdl.md).
# Included from tests/isa/CMakeLists.txt:  include(${CMAKE_CURRENT_LIST_DIR}/pdl.cmake)
#
# Inputs, all optional (set them before the include):
#   PACKFA_PTX_SOURCES       kernel .cu files compiled into the packfa library
#                            (default: PACKFA_CUDA_KERNELS from the top level)
#   PACKFA_PTX_INCLUDE_DIRS  extra include dirs (include/ and src/ are always passed)
#   PACKFA_PTX_DEFINES       extra definitions (NAME or NAME=VALUE)
#   PACKFA_PDL_EXCLUDE       kernel globs NOT enrolled in PDL (not checked)
#   PACKFA_PDL_ALLOW         allow-list entries KERNEL:PARAM[+OFFSET] (constant tables)
#
# Tests (label "isa"; the nvcc ones only with PACKFA_ENABLE_CUDA, no GPU needed):
#   pdl_ptx_check_unit             checker unit tests on hand-written PTX
#   pdl_ptx_check_planted_flagged  planted-bug kernels: exactly the bugs are flagged
#   pdl_ptx_check_planted_fails    the plain check over the planted PTX exits 1 (violations), exactly
#   pdl_ptx_check_sm80_plain       compute_80 build of the same kernels has no griddepcontrol
#   pdl_ptx_check_library          every enrolled packfa kernel passes

find_package(Python3 COMPONENTS Interpreter QUIET)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "packfa: python3 not found; PDL static checks disabled")
  return()
endif()

set(_pdl_isa_dir ${CMAKE_CURRENT_LIST_DIR})
set(_pdl_root ${PROJECT_SOURCE_DIR})
set(_pdl_checker ${_pdl_isa_dir}/ptx_pdl_check.py)

add_test(NAME pdl_ptx_check_unit COMMAND Python3::Interpreter ${_pdl_isa_dir}/test_ptx_pdl_check.py)
set_tests_properties(pdl_ptx_check_unit PROPERTIES LABELS isa)

if(NOT PACKFA_ENABLE_CUDA)
  return()
endif()

# One PTX file per source: nvcc -arch=<arch> --ptx, same flags as the library's PDL build.
set(_pdl_ptx_dir ${CMAKE_CURRENT_BINARY_DIR}/pdl_ptx)
file(MAKE_DIRECTORY ${_pdl_ptx_dir})
set(_pdl_ccbin)
if(CMAKE_CUDA_HOST_COMPILER)
  set(_pdl_ccbin -ccbin ${CMAKE_CUDA_HOST_COMPILER})
endif()

function(_packfa_pdl_ptx out_var src arch tag)
  file(RELATIVE_PATH _rel ${_pdl_root} ${src})
  string(REGEX REPLACE "[/\\.]" "_" _name "${_rel}")
  if(_name MATCHES "^\\.\\._")  # outside the source tree (generated instances)
    get_filename_component(_name ${src} NAME_WE)
  endif()
  set(_out ${_pdl_ptx_dir}/${_name}.${tag}.ptx)
  set(_incs -I${_pdl_root}/include -I${_pdl_root}/src -I${_pdl_root}/tests/pdl)
  foreach(d ${PACKFA_PTX_INCLUDE_DIRS})
    list(APPEND _incs -I${d})
  endforeach()
  set(_defs -DPACKFA_PDL=1 -DPACKFA_HAS_CUDA=1)
  foreach(d ${PACKFA_PTX_DEFINES})
    list(APPEND _defs -D${d})
  endforeach()
  add_custom_command(OUTPUT ${_out}
    COMMAND ${CMAKE_CUDA_COMPILER} ${_pdl_ccbin} -arch=${arch} --ptx -std=c++17 --expt-relaxed-constexpr
            ${_defs} ${_incs} ${src} -o ${_out} -MD -MF ${_out}.d
    DEPENDS ${src}
    DEPFILE ${_out}.d
    COMMENT "PTX (${arch}) for the PDL check: ${_rel}"
    VERBATIM)
  set(${out_var} ${_out} PARENT_SCOPE)
endfunction()

# ---- planted bugs (tests/pdl/pdl_test_kernels.cuh) --------------------------------------------
_packfa_pdl_ptx(_planted90 ${_pdl_root}/tests/pdl/planted_ptx.cu compute_90 sm90)
_packfa_pdl_ptx(_planted80 ${_pdl_root}/tests/pdl/planted_ptx.cu compute_80 sm80)
set(_pdl_all_ptx ${_planted90} ${_planted80})

add_test(NAME pdl_ptx_check_planted_flagged
  COMMAND Python3::Interpreter ${_pdl_checker} ${_planted90}
          --allow pdl_stage_with_table:0+0
          --expect-flagged pdl_bug_read_before_wait
          --expect-flagged pdl_bug_no_wait
          --expect-flagged pdl_bug_exit_before_wait)
# exit 1 (violations) exactly: a parse error (2) or an empty file (3) is not the expected failure
add_test(NAME pdl_ptx_check_planted_fails
  COMMAND Python3::Interpreter ${_pdl_isa_dir}/expect_rc.py 1 ${Python3_EXECUTABLE} ${_pdl_checker} ${_planted90})
add_test(NAME pdl_ptx_check_sm80_plain COMMAND Python3::Interpreter ${_pdl_checker} --expect-plain ${_planted80})
set_tests_properties(pdl_ptx_check_planted_flagged pdl_ptx_check_planted_fails pdl_ptx_check_sm80_plain
  PROPERTIES LABELS isa)

# ---- the library's kernels ------------------------------------------------------------------------
if(NOT DEFINED PACKFA_PTX_SOURCES)
  set(PACKFA_PTX_SOURCES ${PACKFA_CUDA_KERNELS})
endif()
if(NOT DEFINED PACKFA_PDL_EXCLUDE)
  # Not enrolled: the ISA probes (include/packfa/device/probe.hpp) take plain pointer
  # arguments, are launched on their own, and never get the attribute.
  set(PACKFA_PDL_EXCLUDE "*dot4_probe*" "*group_sum_probe*")
endif()
set(_lib_ptx)
foreach(src ${PACKFA_PTX_SOURCES})
  get_filename_component(_abs ${src} ABSOLUTE BASE_DIR ${_pdl_root})
  _packfa_pdl_ptx(_p ${_abs} compute_90 sm90)
  list(APPEND _lib_ptx ${_p})
endforeach()
list(APPEND _pdl_all_ptx ${_lib_ptx})
add_custom_target(packfa_pdl_ptx ALL DEPENDS ${_pdl_all_ptx})

if(_lib_ptx)
  set(_args)
  foreach(g ${PACKFA_PDL_EXCLUDE})
    list(APPEND _args --exclude ${g})
  endforeach()
  foreach(a ${PACKFA_PDL_ALLOW})
    list(APPEND _args --allow ${a})
  endforeach()
  add_test(NAME pdl_ptx_check_library COMMAND Python3::Interpreter ${_pdl_checker} ${_args} ${_lib_ptx})
  set_tests_properties(pdl_ptx_check_library PROPERTIES LABELS isa)
else()
  message(WARNING "packfa: PACKFA_PTX_SOURCES is empty; pdl_ptx_check_library not added")
endif()
