# The CPU API's fuzz target: cpu_api.cpp and cpu_reference's sources compiled by clang with
# libFuzzer, AddressSanitizer and UBSan, whatever compiler builds the rest of flashlab. It is
# not part of the default build: the test "fuzz: build cpu_api" builds it (a fixture), and
# "fuzz: cpu_api" runs it for FLASHLAB_FUZZ_SECONDS from the corpus in corpus/cpu_api/ (new
# inputs go to the build tree, never into the repository). Label: fuzz.
#
# Included from tests/fuzz/CMakeLists.txt (or tests/CMakeLists.txt). Needs clang++ and
# compiler-rt's libFuzzer (Debian: clang-14, libclang-rt-14-dev); without them it says so
# and adds nothing.
find_program(FLASHLAB_FUZZ_CXX NAMES clang++-14 clang++)
set(FLASHLAB_FUZZ_SECONDS 30 CACHE STRING "How long the CPU API's fuzz test runs")

set(probe_dir ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe)
set(fuzz_ok FALSE)
if(FLASHLAB_FUZZ_CXX)
  file(WRITE ${probe_dir}/probe.cpp
       "#include <cstdint>\n#include <cstddef>\n"
       "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
  execute_process(COMMAND ${FLASHLAB_FUZZ_CXX} -fsanitize=fuzzer,address,undefined
                          ${probe_dir}/probe.cpp -o ${probe_dir}/probe
                  RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
  if(probe_rc EQUAL 0)
    set(fuzz_ok TRUE)
  endif()
endif()

if(NOT fuzz_ok)
  message(STATUS "fuzz: no clang++ with libFuzzer (Debian: clang-14 libclang-rt-14-dev); "
                 "the CPU API's fuzz test is not added")
  return()
endif()

set(cpu_dir ${PROJECT_SOURCE_DIR}/cpu_reference)
file(GLOB cpu_sources CONFIGURE_DEPENDS ${cpu_dir}/src/*.cpp)
file(GLOB cpu_headers CONFIGURE_DEPENDS ${cpu_dir}/include/flashlab/cpu/*.hpp)
set(fuzz_binary ${CMAKE_CURRENT_BINARY_DIR}/fuzz_cpu_api)
# One clang command over every source: the sanitizers must see the library's code too.
add_custom_command(
  OUTPUT ${fuzz_binary}
  COMMAND ${FLASHLAB_FUZZ_CXX} -std=c++20 -O1 -g -fno-omit-frame-pointer
          -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
          -I${cpu_dir}/include "-I$<JOIN:$<TARGET_PROPERTY:Eigen3::Eigen,INTERFACE_INCLUDE_DIRECTORIES>,;-I>"
          ${CMAKE_CURRENT_SOURCE_DIR}/cpu_api.cpp ${cpu_sources} -o ${fuzz_binary}
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cpu_api.cpp ${cpu_sources} ${cpu_headers}
  COMMAND_EXPAND_LISTS
  COMMENT "Building the CPU API's fuzz target with clang (libFuzzer, ASan, UBSan)")
add_custom_target(fuzz_cpu_api DEPENDS ${fuzz_binary})

add_test(NAME "fuzz: build cpu_api"
         COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target fuzz_cpu_api)
set_tests_properties("fuzz: build cpu_api" PROPERTIES LABELS fuzz FIXTURES_SETUP fuzz_cpu_api
                     TIMEOUT 1200)

set(work_corpus ${CMAKE_CURRENT_BINARY_DIR}/corpus_cpu_api)
file(MAKE_DIRECTORY ${work_corpus})
add_test(NAME "fuzz: cpu_api"
         COMMAND ${fuzz_binary} -max_total_time=${FLASHLAB_FUZZ_SECONDS} -timeout=10
                 -rss_limit_mb=2048 -print_final_stats=1 ${work_corpus}
                 ${CMAKE_CURRENT_SOURCE_DIR}/corpus/cpu_api)
set_tests_properties("fuzz: cpu_api" PROPERTIES LABELS fuzz FIXTURES_REQUIRED fuzz_cpu_api
                     TIMEOUT 300)
