// bench_l2_partitions: on which SM each block of a grid runs, and which of the L2's partitions
// each SM reads through (the H100 and H200 split their L2 in two halves joined by a fabric).
// The simulator's grid model places blocks on partitions (sim::GridProblem::slot_partitions);
// this program measures the placement it should take.
//
// 1. Placement. A grid whose blocks each take enough shared memory that exactly k fit on an
//    SM (k = 1 to 4) writes each block's %smid: slot b -> SM.
// 2. Partitions, by latency. One thread on a reference SM r follows a chain of pointers
//    through a buffer of `lines` 128-byte lines in a random order (every load depends on the
//    one before, and ld.global.cg skips the L1), so the buffer sits in the L2. Then one thread
//    on SM s follows the same chain twice, timing each step: the first walk ("after r") and
//    the second ("again", after s itself). Hopper keeps a line an SM reads in that SM's
//    partition, so after r every line is near for an SM of r's partition, while an SM of the
//    other one finds them across the fabric (all of them: part 3 shows the other partition
//    keeps none of r's reads, even the lines it is home to). Its "again" walk finds them all
//    near, its own partition now holding a copy. So an SM
//    whose first walk costs about its second shares r's partition; one clearly above it does
//    not. Each SM is measured after two references, r = 0 and an SM that the first pass put on
//    the other side; the two verdicts must be mirror images, and the program says how many are.
//    Each (r, s) pair walks a buffer of its own, so no pair sees another's lines.
//
// 3. The room one side has (--room-mib sizes). One thread on SM 0 walks a chain of X MiB twice
//    and times the second walk; then one thread on an SM of the other side walks it once more
//    ("then the other side"), and SM 0 once again ("SM 0 after it"). While X fits in what
//    SM 0's partition holds for it, SM 0's second walk costs a near load; past that the lines
//    it lost come from the far partition (those homed there) or from DRAM, and the cost a load
//    says how much of the L2 one side's reads can fill: the room the simulator's partitions
//    take (sim::GridProblem's l2_bytes / l2_partitions for lines one side reads).
//
// 4. Where written lines live (--written-mib sizes). After the L2 is filled with clean lines
//    of another buffer (all SMs read kFillTimesL2 times its size), the 1024 threads of a
//    block on SM 0 write a chain of X MiB (whole lines, in address order; the chain steps
//    about kStrideShare of its lines at a time, a stride prime to the line count, so it
//    visits every line once), and one thread walks it once:
//    on SM 0 ("SM 0 after its writes"), or in a second trial on the SM of the other side
//    ("the other side after SM 0's writes"). A third trial has SM 0 read the chain first
//    instead of writing it, then walk it ("SM 0 after its reads", the control: part 3 with
//    this chain). If a written line is kept only in the writer's partition, as a read one is,
//    the other side finds every line across (~386 cycles on the H200); if it is also kept in
//    its home partition, the other side finds the half homed on its side near (~290): the
//    mean, ~338. And SM 0's walk after its writes says how many written lines its partition
//    keeps as X grows, beside its reads.
//
// 5. What one side's lines take from the other side's room (--home-mib sizes; none by
//    default). After the L2 is filled with clean lines, one thread on the other side's SM walks
//    a chain of Y MiB (--home-chain-mib, 20 by default, well inside its partition) twice,
//    timing the second walk ("the other side before"); then the block on SM 0 reads X MiB it
//    has not read before ("read") or writes them ("write"); then the other side walks its
//    chain once more ("after"). The other side never touches SM 0's lines. If a line SM 0
//    reads from DRAM, or writes, is also held at its home partition (the simulator's home
//    copies, sim::GridProblem::l2_home_copies), the half of them homed on the other side take
//    room there, and its chain, older, starts to go once Y + X / 2 passes what a partition
//    holds (about 30 MiB on the H200: X past about 20); if not, its walk after costs what it
//    cost before at every X. The read and write rows say which of SM 0's lines go home.
//
//   bench_l2_partitions [--lines N] [--csv FILE] [--room-mib X ...] [--room-csv FILE]
//                       [--written-mib X ...] [--written-csv FILE]
//                       [--home-mib X ...] [--home-chain-mib Y] [--home-csv FILE]
// Prints a summary; the CSV has one row per block (placement) and per SM (latencies,
// partition), the room's CSV and the written lines' one row per size (cycles a load of each
// walk).
#include "bench_device.cuh"

#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using flashlab::bench::check_cuda;
using flashlab::bench::Device;
using flashlab::bench::device_facts;
using flashlab::bench::shared_bytes_for;
using flashlab::bench::sm_id;

constexpr int kLineBytes = 128;                            // one L2 line
constexpr int kLineWords = kLineBytes / sizeof(unsigned);  // of 32-bit words
// Two sides are told apart only where the dearest first walk costs this many cycles a load
// more than the cheapest (the H200's are 85 apart; noise within one side is under 30).
constexpr double kMinSideGap = 20;
constexpr unsigned kChainSeed = 2026;  // the chains' random order, the same every run
// Part 4: the clean fill reads this many times the L2's size, enough to leave none of what
// was there before; and the written chain steps this share of its length at a time (rounded
// to a stride prime to the line count), so that consecutive steps land far apart in the
// buffer and the walk's order has nothing in common with the write's address order.
constexpr double kFillTimesL2 = 2.5;
constexpr double kStrideShare = 0.618;
// The most sizes a list option takes. Its fewest is 0, so that --room-mib or --written-mib
// given alone skips its part rather than being refused.
constexpr int kMostSizes = 64;

// Placement: block b writes the SM it runs on. The shared memory it asks for (dynamic) only
// sets how many blocks fit on an SM.
__global__ void where_blocks_run(unsigned* sm_of_block) {
  extern __shared__ unsigned char occupy[];
  if (threadIdx.x == 0) {
    occupy[0] = 1;
    sm_of_block[blockIdx.x] = sm_id();
  }
}

// One thread of the block that lands on SM `target` follows the chain from word 0 `walks`
// times over its `steps` lines, writing the cycles of each walk; every other block returns.
// One block fits on an SM (the caller's shared memory), so every SM holds exactly one.
__global__ void walk_chain(const unsigned* chain, int steps, int walks, unsigned target,
                           long long* cycles) {
  extern __shared__ unsigned char occupy[];
  if (sm_id() != target || threadIdx.x != 0) return;
  occupy[0] = 1;
  unsigned at = 0;
  for (int w = 0; w < walks; ++w) {
    const long long start = clock64();
    for (int s = 0; s < steps; ++s) at = __ldcg(chain + at);
    unsigned landed;  // reading `at` waits for the last load before the clock is read
    asm volatile("mov.u32 %0, %1;" : "=r"(landed) : "r"(at));
    cycles[w] = clock64() - start + (landed == 0xffffffffu ? 1 : 0);
  }
}

// Part 4: the block on SM `target` writes whole lines of a chain over `lines` lines, line i's
// first word pointing at line (i + stride) mod lines, the other words 0; 16 bytes a thread.
__global__ void write_chain(uint4* chain, int lines, int stride, unsigned target) {
  extern __shared__ unsigned char occupy[];
  if (sm_id() != target) return;
  if (threadIdx.x == 0) occupy[0] = 1;
  constexpr int kChunks = kLineBytes / sizeof(uint4);  // per line
  for (std::int64_t c = threadIdx.x; c < std::int64_t(lines) * kChunks; c += blockDim.x) {
    const int line = int(c / kChunks);
    const unsigned next = unsigned((std::int64_t(line) + stride) % lines) * kLineWords;
    chain[c] = make_uint4(c % kChunks == 0 ? next : 0u, 0u, 0u, 0u);
  }
}

// Part 4: the block on SM `target` reads every line of the chain once (word 0 of each).
__global__ void read_lines(const unsigned* chain, int lines, unsigned target, unsigned* sink) {
  extern __shared__ unsigned char occupy[];
  if (sm_id() != target) return;
  if (threadIdx.x == 0) occupy[0] = 1;
  unsigned sum = 0;
  for (int line = threadIdx.x; line < lines; line += blockDim.x)
    sum += __ldcg(chain + std::size_t(line) * kLineWords);
  if (sum == 0xffffffffu) *sink = sum;  // keeps the loads
}

// Parts 4 and 5 (CleanFill): every block reads its share of `words` (ld.global.cg), filling
// the L2 with clean lines of this buffer.
__global__ void fill_l2_clean(const unsigned* buffer, std::size_t words, unsigned* sink) {
  unsigned sum = 0;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += std::size_t(gridDim.x) * blockDim.x)
    sum += __ldcg(buffer + i);
  if (sum == 0xffffffffu) *sink = sum;
}

// The L2 lines in `mib` MiB.
int lines_in(int mib) { return int((std::int64_t(mib) << 20) / kLineBytes); }

// Parts 4 and 5 start each trial from an L2 full of clean lines: a buffer of kFillTimesL2 times
// the L2, read by every SM (fill_l2_clean), and the word its sum goes to.
class CleanFill {
 public:
  explicit CleanFill(const Device& dev) : sms_(dev.sms) {
    int l2_bytes = 0;
    check_cuda(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, 0), "L2 size");
    words_ = std::size_t(l2_bytes * kFillTimesL2 / sizeof(unsigned));
    check_cuda(cudaMalloc(&buffer_, sizeof(unsigned) * words_), "cudaMalloc");
    check_cuda(cudaMalloc(&sink_, sizeof(unsigned)), "cudaMalloc");
    check_cuda(cudaMemset(buffer_, 1, sizeof(unsigned) * words_), "cudaMemset");
  }
  CleanFill(const CleanFill&) = delete;
  CleanFill& operator=(const CleanFill&) = delete;
  ~CleanFill() {
    cudaFree(buffer_);
    cudaFree(sink_);
  }
  void run() const { fill_l2_clean<<<sms_ * 4, 1024>>>(buffer_, words_, sink_); }
  // Where a kernel that only reads puts its sum, so that its loads are kept.
  unsigned* sink() const { return sink_; }

 private:
  int sms_;
  std::size_t words_ = 0;
  unsigned *buffer_ = nullptr, *sink_ = nullptr;
};

// A random cycle over `lines` lines: word line * kLineWords holds the next line's first word.
std::vector<unsigned> random_chain(int lines, std::mt19937& rng) {
  std::vector<unsigned> order(static_cast<std::size_t>(lines));
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin() + 1, order.end(), rng);  // the walk starts at line 0
  std::vector<unsigned> chain(static_cast<std::size_t>(lines) * kLineWords, 0u);
  for (int i = 0; i < lines; ++i)
    chain[std::size_t(order[i]) * kLineWords] = order[(i + 1) % lines] * kLineWords;
  return chain;
}

// A CSV at `path` with its header written, or a closed stream where no path is given.
std::ofstream open_csv(const std::string& path, const char* header) {
  std::ofstream out;
  if (path.empty()) return out;
  out.open(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << header;
  return out;
}

struct Walks {
  double after_reference = 0, again = 0;  // cycles a load
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Which SM each block runs on, and which L2 partition each SM reads through"};
  int lines = 4096;
  std::string csv_path;
  app.add_option("--lines", lines, "128-byte lines each chain walks (256 to 65536)")
      ->check(CLI::Range(256, 65536));
  app.add_option("--csv", csv_path, "write the placement and the latencies here");
  std::vector<int> room_mib{8, 16, 20, 24, 28, 32, 36, 40, 48, 56, 64, 80};
  app.add_option("--room-mib", room_mib, "chain sizes (MiB) for the room one side has; "
                 "none to skip it")
      ->expected(0, kMostSizes)
      ->check(CLI::Range(1, 512));
  std::string room_csv_path;
  app.add_option("--room-csv", room_csv_path, "write the room's walks here");
  std::vector<int> written_mib{8, 16, 24, 28, 32, 36, 40, 48, 56, 64};
  app.add_option("--written-mib", written_mib, "chain sizes (MiB) SM 0 writes, then walked; "
                 "none to skip it")
      ->expected(0, kMostSizes)
      ->check(CLI::Range(1, 512));
  std::string written_csv_path;
  app.add_option("--written-csv", written_csv_path, "write the written lines' walks here");
  std::vector<int> home_mib;
  app.add_option("--home-mib", home_mib, "MiB SM 0 reads or writes while the other side's chain "
                 "waits (0 for the control); none to skip it, the default")
      ->check(CLI::Range(0, 512));
  int home_chain_mib = 20;
  app.add_option("--home-chain-mib", home_chain_mib, "the other side's chain (MiB)")
      ->check(CLI::Range(1, 64));
  std::string home_csv_path;
  app.add_option("--home-csv", home_csv_path, "write the home walks here");
  CLI11_PARSE(app, argc, argv);
  // --room-mib or --written-mib given without sizes reads as one size of 0: that part skipped.
  room_mib.erase(std::remove(room_mib.begin(), room_mib.end(), 0), room_mib.end());
  written_mib.erase(std::remove(written_mib.begin(), written_mib.end(), 0), written_mib.end());

  try {
    const Device dev = device_facts();
    std::ofstream csv = open_csv(
        csv_path, "kind,per_sm,index,sm,reference,cycles_after_reference,cycles_again,partition\n");

    // 1. Placement.
    constexpr int kMostPerSm = 4;
    unsigned* d_sm = nullptr;
    check_cuda(cudaMalloc(&d_sm, sizeof(unsigned) * dev.sms * kMostPerSm), "cudaMalloc");
    std::vector<std::vector<unsigned>> placed(kMostPerSm + 1);
    for (int per_sm = 1; per_sm <= kMostPerSm; ++per_sm) {
      const int blocks = dev.sms * per_sm;
      const int bytes = shared_bytes_for(where_blocks_run, dev, per_sm, 128);
      where_blocks_run<<<blocks, 128, bytes>>>(d_sm);
      check_cuda(cudaDeviceSynchronize(), "where_blocks_run");
      placed[per_sm].resize(static_cast<std::size_t>(blocks));
      check_cuda(cudaMemcpy(placed[per_sm].data(), d_sm, sizeof(unsigned) * blocks,
                            cudaMemcpyDeviceToHost),
                 "cudaMemcpy");
      for (int b = 0; b < blocks; ++b)
        if (csv) csv << fmt::format("block,{},{},{},,,,\n", per_sm, b, placed[per_sm][b]);
    }
    fmt::print("placement: 1 block an SM, blocks 0..15 on SMs");
    for (int b = 0; b < 16; ++b) fmt::print(" {}", placed[1][b]);
    fmt::print("\n");
    for (int per_sm = 2; per_sm <= kMostPerSm; ++per_sm) {
      int same_sm = 0;  // blocks b and b + SMs together, as "slot k on SM k mod SMs" has it?
      for (int b = 0; b < dev.sms * (per_sm - 1); ++b)
        same_sm += placed[per_sm][b] == placed[per_sm][b + dev.sms];
      fmt::print("           {} blocks an SM: b and b + {} on one SM for {} of {} b\n", per_sm,
                 dev.sms, same_sm, dev.sms * (per_sm - 1));
    }

    // 2. Partitions: for each reference, a fresh chain per SM.
    const int bytes = shared_bytes_for(walk_chain, dev, 1, 32);
    std::mt19937 rng(kChainSeed);
    const std::size_t words = std::size_t(lines) * kLineWords;
    unsigned* d_chains = nullptr;
    check_cuda(cudaMalloc(&d_chains, sizeof(unsigned) * words * dev.sms), "cudaMalloc");
    long long* d_cycles = nullptr;
    check_cuda(cudaMalloc(&d_cycles, sizeof(long long) * 2), "cudaMalloc");
    auto measure = [&](unsigned reference) {
      for (int s = 0; s < dev.sms; ++s) {
        const std::vector<unsigned> chain = random_chain(lines, rng);
        check_cuda(cudaMemcpy(d_chains + words * s, chain.data(), sizeof(unsigned) * words,
                              cudaMemcpyHostToDevice),
                   "cudaMemcpy");
      }
      std::vector<Walks> out(static_cast<std::size_t>(dev.sms));
      for (int s = 0; s < dev.sms; ++s) {
        const unsigned* chain = d_chains + words * s;
        walk_chain<<<dev.sms, 32, bytes>>>(chain, lines, 1, reference, d_cycles);
        walk_chain<<<dev.sms, 32, bytes>>>(chain, lines, 2, unsigned(s), d_cycles);
        long long cycles[2];
        check_cuda(cudaMemcpy(cycles, d_cycles, sizeof cycles, cudaMemcpyDeviceToHost), "walk");
        out[s] = {double(cycles[0]) / lines, double(cycles[1]) / lines};
      }
      return out;
    };
    // An SM is on the reference's side where its first walk costs less than halfway between
    // the cheapest and the dearest first walks (at least kMinSideGap apart, else one level).
    auto sides = [&](const std::vector<Walks>& w, std::vector<int>& side) {
      double lo = 1e30, hi = 0;
      for (const Walks& x : w) lo = std::min(lo, x.after_reference), hi = std::max(hi, x.after_reference);
      side.assign(w.size(), 0);
      if (hi - lo < kMinSideGap) return false;
      for (std::size_t s = 0; s < w.size(); ++s) side[s] = w[s].after_reference < (lo + hi) / 2 ? 0 : 1;
      return true;
    };
    const std::vector<Walks> from0 = measure(0);
    std::vector<int> side0;
    const bool two_levels = sides(from0, side0);
    int other = -1;
    double dearest = 0;
    for (int s = 0; s < dev.sms; ++s)
      if (from0[s].after_reference > dearest) dearest = from0[s].after_reference, other = s;
    const std::vector<Walks> from_other = measure(unsigned(other));
    std::vector<int> side_other;
    sides(from_other, side_other);
    int mirrored = 0;
    for (int s = 0; s < dev.sms; ++s) mirrored += side0[s] != side_other[s];
    for (int s = 0; s < dev.sms; ++s) {
      if (!csv) break;
      csv << fmt::format("sm,1,{},{},0,{:.1f},{:.1f},{}\n", s, s, from0[s].after_reference,
                         from0[s].again, side0[s]);
      csv << fmt::format("sm,1,{},{},{},{:.1f},{:.1f},{}\n", s, s, other,
                         from_other[s].after_reference, from_other[s].again, side_other[s]);
    }

    auto stats = [&](const std::vector<Walks>& w, const std::vector<int>& side, int which) {
      std::vector<double> a, g;
      for (std::size_t s = 0; s < w.size(); ++s)
        if (side[s] == which) a.push_back(w[s].after_reference), g.push_back(w[s].again);
      auto median = [](std::vector<double> v) {
        if (v.empty()) return 0.0;
        std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
        return v[v.size() / 2];
      };
      return fmt::format("{:3} SMs, cycles a load after the reference {:6.1f}, again {:6.1f}",
                         a.size(), median(a), median(g));
    };
    fmt::print("partitions ({} lines a chain, medians):\n", lines);
    fmt::print("  after SM 0, its side:      {}\n", stats(from0, side0, 0));
    fmt::print("  after SM 0, the other:     {}\n", stats(from0, side0, 1));
    fmt::print("  after SM {:3}, its side:    {}\n", other, stats(from_other, side_other, 0));
    fmt::print("  after SM {:3}, the other:   {}\n", other, stats(from_other, side_other, 1));
    fmt::print("two levels: {}; the two references' verdicts mirror each other for {} of {} SMs\n",
               two_levels ? "yes" : "no", mirrored, dev.sms);
    fmt::print("partition of the SM of slot b (1 block an SM), b = 0..{}:", dev.sms - 1);
    for (int b = 0; b < dev.sms; ++b) fmt::print("{}{}", b % 33 == 0 ? "\n  " : " ", side0[placed[1][b]]);
    fmt::print("\npartition of SM s, s = 0..{}:", dev.sms - 1);
    for (int s = 0; s < dev.sms; ++s) fmt::print("{}{}", s % 33 == 0 ? "\n  " : " ", side0[s]);
    fmt::print("\n");

    // 3. The room one side has: SM 0 twice, then an SM of the other side, then SM 0 again.
    std::ofstream room_csv =
        open_csv(room_csv_path, "mib,sm0_again,other_sm,other_side,sm0_after_it\n");
    if (!room_mib.empty())
      fmt::print("room (cycles a load; SM 0's side, then SM {} of the other):\n"
                 "     MiB  SM 0 again  then the other side  SM 0 after it\n", other);
    for (const int mib : room_mib) {
      const int room_lines = lines_in(mib);
      const std::size_t room_words = std::size_t(room_lines) * kLineWords;
      const std::vector<unsigned> chain = random_chain(room_lines, rng);
      unsigned* d_room = nullptr;
      check_cuda(cudaMalloc(&d_room, sizeof(unsigned) * room_words), "cudaMalloc");
      check_cuda(cudaMemcpy(d_room, chain.data(), sizeof(unsigned) * room_words,
                            cudaMemcpyHostToDevice),
                 "cudaMemcpy");
      double cost[3];
      const unsigned walkers[3] = {0u, unsigned(other), 0u};
      for (int i = 0; i < 3; ++i) {
        const int walks = i == 0 ? 2 : 1;  // SM 0's first walk only fills the L2
        walk_chain<<<dev.sms, 32, bytes>>>(d_room, room_lines, walks, walkers[i], d_cycles);
        long long cycles[2];
        check_cuda(cudaMemcpy(cycles, d_cycles, sizeof cycles, cudaMemcpyDeviceToHost), "walk");
        cost[i] = double(cycles[walks - 1]) / room_lines;
      }
      fmt::print("  {:6}  {:10.1f}  {:19.1f}  {:13.1f}\n", mib, cost[0], cost[1], cost[2]);
      if (room_csv)
        room_csv << fmt::format("{},{:.1f},{},{:.1f},{:.1f}\n", mib, cost[0], other, cost[1],
                                cost[2]);
      cudaFree(d_room);
    }
    // 4. Where written lines live: SM 0 writes a chain (or reads it, the control), then SM 0
    // or the other side walks it once, each trial after the L2 is filled with clean lines.
    std::ofstream written_csv =
        open_csv(written_csv_path,
                 "mib,sm0_after_its_writes,other_sm,other_after_sm0_writes,sm0_after_its_reads\n");
    if (!written_mib.empty()) {
      fmt::print("written lines (cycles a load; SM 0 writes X MiB, then a walk on SM 0 or SM {}):\n"
                 "     MiB  SM 0 after its writes  SM {} after them  SM 0 after its reads\n",
                 other, other);
      const CleanFill fill(dev);
      const int writer_bytes = shared_bytes_for(write_chain, dev, 1, 1024);
      const int reader_bytes = shared_bytes_for(read_lines, dev, 1, 1024);
      for (const int mib : written_mib) {
        const int n = lines_in(mib);
        int stride = int(n * kStrideShare);
        while (std::gcd(stride, n) != 1) ++stride;
        unsigned* d_chain = nullptr;
        check_cuda(cudaMalloc(&d_chain, std::size_t(n) * kLineBytes), "cudaMalloc");
        double cost[3];
        const unsigned walkers[3] = {0u, unsigned(other), 0u};
        for (int trial = 0; trial < 3; ++trial) {
          fill.run();
          if (trial < 2)
            write_chain<<<dev.sms, 1024, writer_bytes>>>(reinterpret_cast<uint4*>(d_chain), n,
                                                         stride, 0u);
          else  // the control: the same chain (written in trial 0), now read by SM 0
            read_lines<<<dev.sms, 1024, reader_bytes>>>(d_chain, n, 0u, fill.sink());
          walk_chain<<<dev.sms, 32, bytes>>>(d_chain, n, 1, walkers[trial], d_cycles);
          long long cycles = 0;
          check_cuda(cudaMemcpy(&cycles, d_cycles, sizeof cycles, cudaMemcpyDeviceToHost),
                     "written walk");
          cost[trial] = double(cycles) / n;
        }
        fmt::print("  {:6}  {:21.1f}  {:16.1f}  {:20.1f}\n", mib, cost[0], cost[1], cost[2]);
        if (written_csv)
          written_csv << fmt::format("{},{:.1f},{},{:.1f},{:.1f}\n", mib, cost[0], other, cost[1],
                                     cost[2]);
        cudaFree(d_chain);
      }
    }
    // 5. What one side's lines take from the other side's room: the other side's chain walked,
    // SM 0 reads or writes X MiB of its own, the other side's chain walked again.
    std::ofstream home_csv = open_csv(
        home_csv_path, "sm0_mib,sm0_does,other_sm,other_chain_mib,other_before,other_after\n");
    if (!home_mib.empty()) {
      fmt::print("home copies (cycles a load; SM {} walks its chain of {} MiB, SM 0 reads or "
                 "writes X MiB, SM {} walks it again):\n"
                 "     MiB  SM 0 does  before  after\n",
                 other, home_chain_mib, other);
      const CleanFill fill(dev);
      const int y_lines = lines_in(home_chain_mib);
      const std::vector<unsigned> y_chain = random_chain(y_lines, rng);
      const int x_most = std::max(1, lines_in(*std::max_element(home_mib.begin(), home_mib.end())));
      unsigned *d_y = nullptr, *d_x = nullptr;
      check_cuda(cudaMalloc(&d_y, y_chain.size() * sizeof(unsigned)), "cudaMalloc");
      check_cuda(cudaMalloc(&d_x, std::size_t(x_most) * kLineBytes), "cudaMalloc");
      check_cuda(cudaMemset(d_x, 0, std::size_t(x_most) * kLineBytes), "cudaMemset");
      check_cuda(cudaMemcpy(d_y, y_chain.data(), y_chain.size() * sizeof(unsigned),
                            cudaMemcpyHostToDevice),
                 "cudaMemcpy");
      const int writer_bytes = shared_bytes_for(write_chain, dev, 1, 1024);
      const int reader_bytes = shared_bytes_for(read_lines, dev, 1, 1024);
      for (const int mib : home_mib) {
        const int n = lines_in(mib);
        for (const bool writes : {false, true}) {
          fill.run();
          walk_chain<<<dev.sms, 32, bytes>>>(d_y, y_lines, 2, unsigned(other), d_cycles);
          long long before[2];
          check_cuda(cudaMemcpy(before, d_cycles, sizeof before, cudaMemcpyDeviceToHost),
                     "home walk");
          if (n > 0 && writes)
            write_chain<<<dev.sms, 1024, writer_bytes>>>(reinterpret_cast<uint4*>(d_x), n, 1, 0u);
          else if (n > 0)
            read_lines<<<dev.sms, 1024, reader_bytes>>>(d_x, n, 0u, fill.sink());
          walk_chain<<<dev.sms, 32, bytes>>>(d_y, y_lines, 1, unsigned(other), d_cycles);
          long long after = 0;
          check_cuda(cudaMemcpy(&after, d_cycles, sizeof after, cudaMemcpyDeviceToHost),
                     "home walk");
          const char* does = writes ? "write" : "read";
          const double b = double(before[1]) / y_lines, a = double(after) / y_lines;
          fmt::print("  {:6}  {:>9}  {:6.1f}  {:5.1f}\n", mib, does, b, a);
          if (home_csv)
            home_csv << fmt::format("{},{},{},{},{:.1f},{:.1f}\n", mib, does, other,
                                    home_chain_mib, b, a);
        }
      }
      cudaFree(d_y);
      cudaFree(d_x);
    }
    cudaFree(d_cycles);
    cudaFree(d_chains);
    cudaFree(d_sm);
    return two_levels && mirrored == dev.sms ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_l2_partitions: %s\n", e.what());
    return 1;
  }
}
