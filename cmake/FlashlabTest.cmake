# flashlab_add_test(NAME <target> LABEL <label> SOURCES <files...> LIBS <targets...>)
# Builds one doctest program and registers each of its test cases with CTest under LABEL.
# Test names must not contain ";" (CTest would split them into a list and register a test
# that runs no case): a further test, "<label>: <target>'s test names hold no semicolon",
# checks it (CheckTestNames.cmake).
# A program may exit with kFlashlabSkip (77) to report "skipped" (the GPU tests do that
# where no GPU is present), which CTest shows as skipped rather than failed.
function(flashlab_add_test)
  cmake_parse_arguments(T "" "NAME;LABEL" "SOURCES;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE doctest::doctest ${T_LIBS})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
  doctest_discover_tests(${T_NAME}
    TEST_PREFIX "${T_LABEL}: "
    PROPERTIES LABELS ${T_LABEL} SKIP_RETURN_CODE 77)
  add_test(NAME "${T_LABEL}: ${T_NAME}'s test names hold no semicolon"
           COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:${T_NAME}>
                   -P ${PROJECT_SOURCE_DIR}/cmake/CheckTestNames.cmake)
  set_tests_properties("${T_LABEL}: ${T_NAME}'s test names hold no semicolon"
                       PROPERTIES LABELS ${T_LABEL})
endfunction()
