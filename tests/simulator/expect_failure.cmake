# Runs a command and passes only if it fails with one line of error matching EXPECT
# (CLI11's 'Run with --help' hint aside).
#   cmake -DCOMMAND="prog|arg|arg" -DEXPECT="regex" -P expect_failure.cmake
# ('|' separates the arguments: a CMake list would be split on the way in.)
string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit, got 0; output:\n${out}${err}")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "the error does not match '${EXPECT}':\n${err}")
endif()
# CLI11 follows its own parse errors with a hint, which is not a second error.
string(REPLACE "Run with --help for more information." "" err_stripped "${err}")
string(STRIP "${err_stripped}" err_stripped)
if(err_stripped MATCHES "\n")
  message(FATAL_ERROR "expected one line of error, got:\n${err}")
endif()
