# cmake -P script behind the consumer ctests (see consumer_test.cmake).
#   MODE=install: cmake --install PACKFA_BUILD_DIR into PREFIX (fresh).
#   MODE=project: configure CONSUMER_SOURCE_DIR against PREFIX in WORK_DIR, build, run each
#                 executable of EXES (comma-separated); COMPILER_ARGS picks the compiler.
foreach(v MODE PACKFA_BUILD_DIR PREFIX GENERATOR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "consumer_run.cmake: ${v} not set")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: ${what} failed (${rc})")
  endif()
endfunction()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX})
  step("cmake --install ${PACKFA_BUILD_DIR} (is the build complete?)"
    ${CMAKE_COMMAND} --install ${PACKFA_BUILD_DIR} --prefix ${PREFIX} --config ${CONFIG})
  # What a user of the package relies on.
  file(GLOB _libc ${PREFIX}/lib*/libpackfa_c.so)
  foreach(f include/packfa/api.hpp include/packfa/c_api.h include/packfa/version.hpp bin/packfa-cli
            share/packfa/python/pyproject.toml share/packfa/python/packfa/__init__.py
            share/packfa/python/packfa/_version.py share/packfa/python/packfa/_install.py)
    if(NOT EXISTS ${PREFIX}/${f})
      message(FATAL_ERROR "consumer test: the install has no ${f}")
    endif()
  endforeach()
  if(NOT _libc)
    message(FATAL_ERROR "consumer test: the install has no libpackfa_c.so")
  endif()
  file(GLOB _cfg ${PREFIX}/lib*/cmake/packfa/packfaConfig.cmake)
  if(NOT _cfg)
    message(FATAL_ERROR "consumer test: the install has no lib/cmake/packfa/packfaConfig.cmake")
  endif()
  message(STATUS "consumer test: installed to ${PREFIX}")
  return()
endif()

foreach(v CONSUMER_SOURCE_DIR WORK_DIR EXES)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "consumer_run.cmake: ${v} not set")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
step("configure ${CONSUMER_SOURCE_DIR}"
  ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR} -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=${CONFIG} -DCMAKE_PREFIX_PATH=${PREFIX} ${COMPILER_ARGS})
step("build ${CONSUMER_SOURCE_DIR}" ${CMAKE_COMMAND} --build ${WORK_DIR} --config ${CONFIG})
string(REPLACE "," ";" EXES "${EXES}")
foreach(e ${EXES})
  find_program(_exe_${e} ${e} PATHS ${WORK_DIR} ${WORK_DIR}/${CONFIG} NO_DEFAULT_PATH NO_CACHE)
  if(NOT _exe_${e})
    message(FATAL_ERROR "consumer test: ${e} not built")
  endif()
  step("run ${e}" ${_exe_${e}})
endforeach()
