// Golden outputs of `flashlab trace`: the program's own output, stored in golden/, must not
// change unnoticed. The files are written by the program (FLASHLAB_UPDATE_GOLDEN=1 rewrites
// them) and each is also checked for the values that are known without the program.
#include "run_flashlab.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace {

// The 24-token trace prints fp32 values to 6 significant digits; how a compiler contracts
// a * b + c (one rounding with FMA, two without) can move the last of them by one, which is
// up to 1e-5 relative for a leading digit of 1. So numbers are equal within 1e-5 relative;
// every other character must match exactly. A wrong state is off in the first digits.
constexpr double kPrintedFp32Tolerance = 1e-5;

bool same_token(const std::string& a, const std::string& b) {
  if (a == b) return true;
  char* end_a = nullptr;
  char* end_b = nullptr;
  const double x = std::strtod(a.c_str(), &end_a), y = std::strtod(b.c_str(), &end_b);
  if (*end_a != '\0' || *end_b != '\0' || end_a == a.c_str() || end_b == b.c_str()) return false;
  return std::abs(x - y) <= kPrintedFp32Tolerance * std::max({std::abs(x), std::abs(y), 1e-3});
}

// Equal line by line, token by token (split at spaces and tabs), numbers within tolerance.
bool same_output(const std::string& got, const std::string& want) {
  std::istringstream g(got), w(want);
  std::string gl, wl;
  while (true) {
    const bool more_g = static_cast<bool>(std::getline(g, gl)), more_w = static_cast<bool>(std::getline(w, wl));
    if (more_g != more_w) return false;
    if (!more_g) return true;
    std::istringstream gt(gl), wt(wl);
    std::string a, b;
    while (true) {
      const bool ta = static_cast<bool>(gt >> a), tb = static_cast<bool>(wt >> b);
      if (ta != tb) return false;
      if (!ta) break;
      if (!same_token(a, b)) return false;
    }
  }
}

// Compares the program's output with golden/<name>, or rewrites the file when asked to.
std::string check_golden(const std::string& name, const std::string& args) {
  const auto run = flashlab::test::run_flashlab(args + " --no-color");
  REQUIRE(run.status == 0);
  const std::string path = std::string(FLASHLAB_GOLDEN_DIR) + "/" + name;
  if (std::getenv("FLASHLAB_UPDATE_GOLDEN")) {
    std::ofstream(path) << run.output;
    MESSAGE("rewrote " << path);
  }
  const std::string golden = flashlab::test::read_file(path);
  INFO("golden file " << path << " (FLASHLAB_UPDATE_GOLDEN=1 rewrites it from the program)");
  CHECK(same_output(run.output, golden));
  return golden;
}

// The number after the last tab of the first line that starts with prefix.
double last_field(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(line.find_last_of('\t') + 1));
  FAIL("no line starts with `" << prefix << "`");
  return NAN;
}

}  // namespace

TEST_CASE("golden: flashlab trace --example 49-15") {
  const std::string golden = check_golden("trace-49-15.txt", "trace --example 49-15");
  // The O line is "0<TAB>O<TAB>L" (the one query is row 0); O is the middle field.
  std::istringstream lines(golden);
  bool found = false;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("0\t3.26", 0) == 0) {
      const double O = std::stod(line.substr(2, line.find('\t', 2) - 2));
      CHECK(std::abs(O - 49.0 / 15.0) < 1e-15);
      CHECK(last_field(line, "0\t") == doctest::Approx(std::log(15.0)));  // L = log 15
      found = true;
    }
  CHECK(found);
  CHECK(golden.find("2 computed (0 of them partial") != std::string::npos);
}

TEST_CASE("golden: flashlab trace of the 24-token example, Bc = 4 and 8, causal") {
  constexpr int kN = 24, kBr = 4;
  for (const int Bc : {4, 8}) {
    for (const bool causal : {false, true}) {
      CAPTURE(Bc);
      CAPTURE(causal);
      const std::string name = "trace-n24-d4-br4-bc" + std::to_string(Bc) +
                               (causal ? "-causal" : "") + "-seed0.txt";
      const std::string args = "trace --n 24 --d 4 --br 4 --bc " + std::to_string(Bc) +
                               (causal ? " --causal" : "") + " --seed 0";
      const std::string golden = check_golden(name, args);
      const int Tr = kN / kBr, Tc = kN / Bc;
      // Causal, with Bc a multiple of Br: query tile i computes the KV tiles up to its diagonal.
      int computed = 0;
      for (int i = 0; i < Tr; ++i) computed += causal ? (i * kBr) / Bc + 1 : Tc;
      CHECK(golden.find("score tiles: " + std::to_string(computed) + " computed") !=
            std::string::npos);
      // Q read once, K and V once per computed tile, O and L written once (fp32).
      const int read = 4 * (kN * 4 + computed * 2 * Bc * 4), written = 4 * (kN * 4 + kN);
      CHECK(golden.find("HBM bytes: " + std::to_string(read) + " read, " +
                        std::to_string(written) + " written") != std::string::npos);
    }
  }
}
