# ctest driver of the fuzz run: a fresh seed corpus (the fuzzer writes it, all valid params)
# and a fresh working corpus, then a fixed number of executions with a fixed seed.
#   cmake -DFUZZER=<bin> -DWORK=<dir> -DRUNS=<n> -P run_fuzz.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/seeds ${WORK}/corpus)
execute_process(COMMAND ${CMAKE_COMMAND} -E env PACKFA_FUZZ_WRITE_SEEDS=${WORK}/seeds ${FUZZER} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "writing the seed corpus failed (${rc})")
endif()
execute_process(COMMAND ${FUZZER} -runs=${RUNS} -seed=1 -print_final_stats=1 ${WORK}/corpus ${WORK}/seeds
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer failed (${rc}): a crash, a sanitizer report or a violated property (above)")
endif()
