// libFuzzer target over the `flashlab` command line's argument parsing: the input is split at
// NUL bytes into words, which run_cli (lessons/app/cli.cpp) parses with every subcommand
// registered, in parse-only mode (no command runs, no file is written). Whatever the words,
// run_cli must return 0 or the usage status, never crash, throw or hang. The decimal parser
// behind every integer option is also held to its contract: a value it accepts lies in the
// range and reads back as the same digits.
#include "cli.hpp"
#include "commands.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <iostream>
#include <streambuf>
#include <string>
#include <vector>

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

// Help texts and refusals would flood the fuzzer's log: they go nowhere.
struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
};

void check_parse_integer(FuzzedDataProvider& in) {
  const std::string text = in.ConsumeRandomLengthString(24);
  const std::int64_t a = in.ConsumeIntegral<std::int64_t>(), b = in.ConsumeIntegral<std::int64_t>();
  const std::int64_t min = std::min(a, b), max = std::max(a, b);
  try {
    const std::int64_t v = flashlab::app::parse_integer("--n", text, min, max);
    require(v >= min && v <= max);
    std::string digits = text;  // the text without its sign and leading zeros
    const bool negative = !digits.empty() && digits[0] == '-';
    if (negative) digits.erase(0, 1);
    digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
    require(std::to_string(v) == (negative && v != 0 ? "-" : "") + digits);
  } catch (const CLI::ValidationError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static NullBuffer null;
  std::cout.rdbuf(&null);
  std::cerr.rdbuf(&null);
  flashlab::app::set_parse_only(true);
  return 0;
}

// The first byte chooses: odd, the decimal parser on the rest; even, the words of a command
// line, NUL-separated.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  FuzzedDataProvider in(data + 1, size - 1);
  if (data[0] % 2 == 1) {
    check_parse_integer(in);
    return 0;
  }
  std::vector<std::string> words{"flashlab"};
  const std::string rest = in.ConsumeRemainingBytesAsString();
  for (std::size_t start = 0; start <= rest.size() && words.size() < 24;) {
    const std::size_t end = std::min(rest.find('\0', start), rest.size());
    words.push_back(rest.substr(start, end - start));
    start = end + 1;
  }
  std::vector<const char*> argv;
  for (const auto& w : words) argv.push_back(w.c_str());
  const int status = flashlab::app::run_cli(int(argv.size()), argv.data());
  require(status == 0 || status == flashlab::app::kUsageError);
  return 0;
}
