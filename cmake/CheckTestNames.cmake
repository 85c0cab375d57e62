# cmake -DPROGRAM=<doctest program> -P CheckTestNames.cmake
# cmake -DLISTING=<file of names, one a line> -P CheckTestNames.cmake   (the check's own test)
# Fails when a test case's name holds ";". CTest reads a test's name as a list, so such a name
# is cut at its first ";" and the test registered under it filters on the cut name: it runs
# no case at all and passes. flashlab_add_test (FlashlabTest.cmake) runs this on every
# doctest program.
if(DEFINED LISTING)
  file(READ "${LISTING}" names)
else()
  execute_process(COMMAND "${PROGRAM}" --list-test-cases --no-colors=true
                  OUTPUT_VARIABLE names RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} --list-test-cases exited ${rc}")
  endif()
endif()
string(FIND "${names}" ";" at)
if(NOT at EQUAL -1)
  string(REPLACE ";" "<semicolon>" shown "${names}")
  string(REGEX MATCHALL "[^\n]*<semicolon>[^\n]*" bad "${shown}")
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "test case names hold \";\" (shown as <semicolon>), which CTest "
                      "cuts: write \", and\" or \":\" instead:\n  ${bad}")
endif()
