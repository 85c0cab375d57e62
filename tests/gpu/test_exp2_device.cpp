// software_exp2 on the device gives the host's bits, for every argument: the CPU tests of
// its accuracy (test_exp2_software.cpp) hold for the code fa3's softmax runs. Over a dense
// sweep past both ends of the clamp, each integer's neighbours, and -inf, +inf, NaN.
#include <doctest/doctest.h>

#include "exp2_device.hpp"
#include "flashlab/gpu/exp2_software.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace flashlab::gpu::test {
namespace {

TEST_CASE("software_exp2: the device computes the host's bits") {
  std::vector<float> x;
  constexpr int kStepsPerUnit = 1 << 10;
  for (int i = -130 * kStepsPerUnit; i <= 130 * kStepsPerUnit; ++i)
    x.push_back(float(double(i) / kStepsPerUnit));
  for (int n = -130; n <= 130; ++n) {
    x.push_back(std::nextafter(float(n), -200.0f));
    x.push_back(std::nextafter(float(n), 200.0f));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float edge : {-inf, inf, std::numeric_limits<float>::quiet_NaN(), -1e30f, 1e30f})
    x.push_back(edge);
  const std::vector<float> device = software_exp2_on_device(x);
  REQUIRE(device.size() == x.size());
  int64_t differ = 0;
  float first_x = 0, first_host = 0, first_device = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float host = software_exp2(x[i]);
    if (std::memcmp(&host, &device[i], sizeof host) != 0 && differ++ == 0)
      first_x = x[i], first_host = host, first_device = device[i];
  }
  INFO(differ, " of ", x.size(), " differ; the first at x = ", first_x, ": host ", first_host,
       ", device ", first_device);
  CHECK(differ == 0);
}

}  // namespace
}  // namespace flashlab::gpu::test
