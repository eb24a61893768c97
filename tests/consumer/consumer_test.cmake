# ctest "consumer_find_package": install this build to a scratch prefix, then configure, build
# and run tests/consumer against it with find_package(packfa CONFIG). One cmake -P script, so
# the steps run in order; it needs the main build done first (ctest runs after the build).
set(_packfa_consumer_dir ${CMAKE_BINARY_DIR}/consumer-test)
add_test(NAME consumer_find_package
  COMMAND ${CMAKE_COMMAND}
    -DPACKFA_BUILD_DIR=${CMAKE_BINARY_DIR}
    -DCONSUMER_SOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}
    -DWORK_DIR=${_packfa_consumer_dir}
    -DGENERATOR=${CMAKE_GENERATOR}
    -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
    -DCONFIG=$<CONFIG>
    -P ${CMAKE_CURRENT_LIST_DIR}/consumer_run.cmake)
set_tests_properties(consumer_find_package PROPERTIES LABELS "consumer;cpu" TIMEOUT 900)
