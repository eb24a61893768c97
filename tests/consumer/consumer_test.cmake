# Consumers of an installed packfa, built and run by ctest from a scratch prefix:
#   consumer_install       cmake --install of this build (fixture: the others need it first)
#   consumer_find_package  C++ (tests/consumer): packfa::core + packfa::packfa, fa_packed16_forward
#   consumer_c             a `LANGUAGES C` project (tests/consumer/c) linking packfa::c
#   consumer_python        import of the installed Python package (PYTHONPATH)
#   consumer_pip           offline pip install of it, then import (skipped without pip)
# They need the main build complete (ctest runs after the build).
set(_packfa_consumer_dir ${CMAKE_BINARY_DIR}/consumer-test)
set(_packfa_consumer_prefix ${_packfa_consumer_dir}/prefix)
set(_packfa_consumer_common
  -DPACKFA_BUILD_DIR=${CMAKE_BINARY_DIR} -DPREFIX=${_packfa_consumer_prefix} -DGENERATOR=${CMAKE_GENERATOR}
  -DCONFIG=$<CONFIG>)
add_test(NAME consumer_install
  COMMAND ${CMAKE_COMMAND} -DMODE=install ${_packfa_consumer_common} -P ${CMAKE_CURRENT_LIST_DIR}/consumer_run.cmake)
set_tests_properties(consumer_install PROPERTIES FIXTURES_SETUP packfa_install LABELS "consumer;cpu" TIMEOUT 300)

add_test(NAME consumer_find_package
  COMMAND ${CMAKE_COMMAND} -DMODE=project ${_packfa_consumer_common}
    -DCONSUMER_SOURCE_DIR=${CMAKE_CURRENT_LIST_DIR} -DWORK_DIR=${_packfa_consumer_dir}/cxx
    -DCOMPILER_ARGS=-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER} -DEXES=packfa_consumer,packfa_consumer_forward
    -P ${CMAKE_CURRENT_LIST_DIR}/consumer_run.cmake)
add_test(NAME consumer_c
  COMMAND ${CMAKE_COMMAND} -DMODE=project ${_packfa_consumer_common}
    -DCONSUMER_SOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}/c -DWORK_DIR=${_packfa_consumer_dir}/c
    -DCOMPILER_ARGS=-DCMAKE_C_COMPILER=${CMAKE_C_COMPILER} -DEXES=packfa_consumer_c
    -P ${CMAKE_CURRENT_LIST_DIR}/consumer_run.cmake)
set_tests_properties(consumer_find_package consumer_c PROPERTIES
  FIXTURES_REQUIRED packfa_install LABELS "consumer;cpu" TIMEOUT 900)

if(Python3_EXECUTABLE)
  foreach(_mode import pip)
    set(_name consumer_python)
    if(_mode STREQUAL "pip")
      set(_name consumer_pip)
    endif()
    add_test(NAME ${_name} COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/python_consumer.py ${_mode}
      ${_packfa_consumer_prefix} ${PROJECT_VERSION} ${_packfa_consumer_dir}/python-${_mode})
    set_tests_properties(${_name} PROPERTIES FIXTURES_REQUIRED packfa_install LABELS "consumer;cpu;python"
      TIMEOUT 300 SKIP_RETURN_CODE 77)
  endforeach()
endif()
