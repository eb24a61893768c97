# cmake -P script behind the ctest "consumer_find_package" (see consumer_test.cmake).
# Inputs: PACKFA_BUILD_DIR, CONSUMER_SOURCE_DIR, WORK_DIR, GENERATOR, CXX_COMPILER, CONFIG.
foreach(v PACKFA_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR)
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

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
step("cmake --install ${PACKFA_BUILD_DIR} (is the build complete?)"
  ${CMAKE_COMMAND} --install ${PACKFA_BUILD_DIR} --prefix ${prefix} --config ${CONFIG})
if(NOT EXISTS ${prefix}/include/packfa/format.hpp)
  message(FATAL_ERROR "consumer test: install did not produce include/packfa/format.hpp")
endif()

set(cxx)
if(CXX_COMPILER)
  set(cxx -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
endif()
step("configure consumer"
  ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=${CONFIG} -DCMAKE_PREFIX_PATH=${prefix} ${cxx})
step("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build --config ${CONFIG})

find_program(exe packfa_consumer PATHS ${WORK_DIR}/build ${WORK_DIR}/build/${CONFIG} NO_DEFAULT_PATH)
if(NOT exe)
  message(FATAL_ERROR "consumer test: packfa_consumer not built")
endif()
step("run consumer" ${exe})
