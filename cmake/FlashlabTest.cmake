# flashlab_add_test(NAME <target> LABEL <label> SOURCES <files...> LIBS <targets...>)
# Builds one doctest program and registers each of its test cases with CTest under LABEL.
# Test names must not contain ";" (CTest would split them into a list).
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
endfunction()
