// GPU check + benchmark for the H200 engine's fuel step (src/engine/h200/): memory budget, arena and
// weight loader together, the way upright and fuel use them. Runs on the H200 machine (CI compiles it).
//
//  1. Budget: free memory right after context creation, then the reserve once the engine's
//     out-of-arena holdings exist (two streams, an event, the workspace). A plan whose residency is
//     exactly usable is admitted; a fake plan 5 GiB larger is refused with residency, usable and the
//     difference in the message.
//  2. Writes a random file (default 8 GiB) whose content is a function of the word index, computing a
//     checksum per 64 MiB block while writing, then fsyncs it.
//  3. Loads it into a poisoned arena (blob + 64 MiB of runtime space) with each read mode and reader
//     count; after every load the device recomputes the block checksums over every byte and compares
//     them with the host's, and checks the runtime space past the blob is still poison. Each
//     configuration is timed against a raw read of the same file (no device copy) in the same run.
// Prints a table; exit 1 on any failure. Usage: weight_load_check [--gib N] [--dir DIR]
#include <cuda_runtime.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "boosters/profile.h"
#include "core/align.h"
#include "engine/h200/arena.h"
#include "engine/h200/device_budget.h"
#include "engine/h200/weight_loader.h"
#include "kernels/cuda/primitives/cuda_check.h"
#include "plan/plan.h"

using namespace rocket;

namespace {

constexpr uint64_t kVerifyBlock = 64 * kMiB;  // one checksum per block, so a mismatch has a location
constexpr uint64_t kRuntimeBytes = 64 * kMiB;  // arena past the blob, which no load may touch
constexpr uint64_t kSeed = 0x2545f4914f6cdd1dull;
constexpr double kTargetGbps = 10.0;  // page cache → device

// splitmix64's finaliser: a bijection whose output bits each depend on every input bit.
__host__ __device__ inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The test file's word at word index i.
inline uint64_t file_word(uint64_t i) { return mix64(i ^ kSeed); }

// One word's share of a checksum: depends on its value and its index, so a moved chunk changes the
// sum as surely as a wrong byte; a sum of shares is order-free, so the device computes it in parallel.
__host__ __device__ inline uint64_t checksum_term(uint64_t index, uint64_t word) { return mix64(word ^ mix64(index)); }

constexpr int kThreads = 256;
constexpr int kPartsPerBlock = 256;  // CUDA blocks per verify block

// sums[blockIdx.y] += the checksum terms of words [blockIdx.y * block_words, +block_words), word indices
// counted from first_index.
__global__ void block_checksums(const uint64_t* words, uint64_t first_index, uint64_t block_words, uint64_t* sums) {
  const uint64_t part_words = (block_words + kPartsPerBlock - 1) / kPartsPerBlock;
  const uint64_t begin = blockIdx.y * block_words + blockIdx.x * part_words;
  const uint64_t end = min(blockIdx.y * block_words + block_words, begin + part_words);
  uint64_t sum = 0;
  for (uint64_t i = begin + threadIdx.x; i < end; i += kThreads) sum += checksum_term(first_index + i, words[i]);
  for (int d = 16; d > 0; d /= 2) sum += __shfl_down_sync(0xffffffffu, sum, d);
  if (threadIdx.x % 32 == 0) atomicAdd(reinterpret_cast<unsigned long long*>(sums + blockIdx.y), sum);
}

std::vector<uint64_t> device_checksums(const uint64_t* words, uint64_t first_index, uint64_t blocks,
                                       uint64_t block_words) {
  uint64_t* sums = nullptr;
  CUDA_CHECK(cudaMalloc(&sums, blocks * sizeof(uint64_t)));
  CUDA_CHECK(cudaMemset(sums, 0, blocks * sizeof(uint64_t)));
  block_checksums<<<dim3(kPartsPerBlock, unsigned(blocks)), kThreads>>>(words, first_index, block_words, sums);
  CUDA_CHECK_LAUNCH();
  std::vector<uint64_t> out(blocks);
  CUDA_CHECK(cudaMemcpy(out.data(), sums, blocks * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(sums));
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Writes the test file with every hardware thread (content generated on the fly) and returns the
// checksum of each kVerifyBlock; fsyncs so O_DIRECT runs read the disk, not pending writeback.
std::vector<uint64_t> write_test_file(const std::string& path, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path + ": cannot create: " + std::strerror(errno));
  const uint64_t blocks = bytes / kVerifyBlock, block_words = kVerifyBlock / 8;
  std::vector<uint64_t> sums(blocks);
  std::mutex error_mutex;
  std::exception_ptr error;
  auto work = [&](unsigned t, unsigned threads) {
    try {
      std::vector<uint64_t> buf(block_words);
      for (uint64_t b = t; b < blocks; b += threads) {
        uint64_t sum = 0;
        for (uint64_t j = 0; j < block_words; ++j) {
          const uint64_t i = b * block_words + j;
          buf[j] = file_word(i);
          sum += checksum_term(i, buf[j]);
        }
        sums[b] = sum;
        const char* p = reinterpret_cast<const char*>(buf.data());
        for (uint64_t done = 0; done < kVerifyBlock;) {
          const ssize_t n = ::pwrite(fd, p + done, kVerifyBlock - done, off_t(b * kVerifyBlock + done));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) throw Error(path + ": write at offset " + std::to_string(b * kVerifyBlock + done) + " failed: " +
                                  std::strerror(errno));
          done += uint64_t(n);
        }
      }
    } catch (...) {
      const std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  {
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::jthread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work, t, threads);
  }
  const double write_s = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  const int synced = ::fsync(fd);
  const int sync_errno = errno;
  ::close(fd);
  if (error) std::rethrow_exception(error);
  if (synced != 0) throw Error(path + ": fsync failed: " + std::strerror(sync_errno));
  std::printf("wrote %s: %.2f GiB in %.2f s (generated on the fly), fsync %.2f s\n", path.c_str(),
              double(bytes) / double(kGiB), write_s, seconds_since(t1));
  return sums;
}

// Every byte of the blob region against the host's block checksums, and the runtime space past it
// against the poison. Returns "" or what differs first.
std::string verify(const Arena& arena, uint64_t blob_bytes, const std::vector<uint64_t>& want) {
  const uint64_t block_words = kVerifyBlock / 8;
  const std::vector<uint64_t> got = device_checksums(arena.at<uint64_t>(0, blob_bytes / 8), 0, want.size(), block_words);
  for (size_t b = 0; b < want.size(); ++b)
    if (got[b] != want[b]) return "blob bytes differ in the 64 MiB block at offset " + std::to_string(b * kVerifyBlock);
  const uint64_t tail_words = (arena.bytes() - blob_bytes) / 8, first = blob_bytes / 8;
  uint64_t poison = 0;
  for (uint64_t i = 0; i < tail_words; ++i) poison += checksum_term(first + i, ~uint64_t(0));
  const std::vector<uint64_t> tail = device_checksums(arena.at<uint64_t>(blob_bytes, tail_words), first, 1, tail_words);
  if (tail[0] != poison) return "the runtime space past the blob was written";
  return "";
}

std::string mode_name(const LoadReport& r, ReadMode asked) {
  if (r.direct) return "O_DIRECT";
  return asked == ReadMode::kDirect ? "buffered (O_DIRECT refused)" : "buffered";
}

struct Row {
  std::string mode;
  int readers;
  std::string run;
  LoadReport report;
  std::string verdict;
};

void print_rows(const std::vector<Row>& rows) {
  std::printf("\n| mode | readers | run | GiB | seconds | setup s | GB/s | verified |\n");
  std::printf("| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |\n");
  for (const Row& r : rows)
    std::printf("| %s | %d | %s | %.2f | %.3f | %.3f | %.2f | %s |\n", r.mode.c_str(), r.readers, r.run.c_str(),
                double(r.report.bytes) / double(kGiB), r.report.seconds, r.report.setup_seconds, r.report.gbps(),
                r.verdict.c_str());
}

// Budget measured as upright measures it, and its refusal. Returns the number of failures.
int check_budget(uint64_t free_at_context, MemoryBudget& budget) {
  // What the engine holds outside its arena, created before the budget is measured (profile.h).
  cudaStream_t compute = nullptr, copy = nullptr;
  cudaEvent_t done = nullptr;
  void* workspace = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CUDA_CHECK(cudaMalloc(&workspace, kH200Workspace));
  budget = measure_budget(free_at_context);
  std::printf("budget: %s\n", budget.describe().c_str());

  int failures = 0;
  Plan fits;
  fits.booster = "h200";
  fits.arena_bytes = budget.usable();
  try {
    budget.admit(fits.arena_bytes, "device memory");
  } catch (const Error& e) {
    std::printf("FAIL budget: a plan of exactly usable memory was refused: %s\n", e.what());
    ++failures;
  }
  Plan too_big = fits;
  too_big.arena_bytes = budget.usable() + 5 * kGiB;
  std::string msg;
  try {
    budget.admit(too_big.arena_bytes, "device memory");
  } catch (const Error& e) {
    msg = e.what();
  }
  const std::string residency = fixed(double(too_big.arena_bytes) / double(kGiB)) + " GiB";
  const std::string usable = fixed(double(budget.usable()) / double(kGiB)) + " GiB";
  const bool said = msg.find("plan residency " + residency) != std::string::npos &&
                    msg.find("usable device memory " + usable) != std::string::npos &&
                    msg.find("by 5.00 GiB") != std::string::npos;
  std::printf("budget refusal of a %s plan: %s\n  %s\n", residency.c_str(), said ? "ok" : "FAIL",
              msg.empty() ? "(admitted: no refusal)" : msg.c_str());
  failures += !said;

  CUDA_CHECK(cudaFree(workspace));
  CUDA_CHECK(cudaEventDestroy(done));
  CUDA_CHECK(cudaStreamDestroy(copy));
  CUDA_CHECK(cudaStreamDestroy(compute));
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t gib = 8;
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = tmp && *tmp ? tmp : "/tmp";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--gib" && i + 1 < argc) gib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else {
      std::fprintf(stderr, "usage: weight_load_check [--gib N] [--dir DIR]\n");
      return 2;
    }
  }
  if (gib == 0) {
    std::fprintf(stderr, "weight_load_check: --gib must be a positive whole number of GiB\n");
    return 2;
  }
  const std::string path = dir + "/rocket_weight_load_check.blob";
  int failures = 0;
  try {
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(0));  // creates the context
    const uint64_t free_at_context = device_free_bytes();
    MemoryBudget budget;
    failures += check_budget(free_at_context, budget);

    Plan plan;
    plan.booster = "h200";
    plan.blob_bytes = gib * kGiB;
    plan.arena_bytes = plan.blob_bytes + kRuntimeBytes;
    budget.admit(plan.arena_bytes, "device memory");
    const std::vector<uint64_t> want = write_test_file(path, plan.blob_bytes);
    const Arena arena(plan.arena_bytes);

    struct Config {
      ReadMode mode;
      int readers, loads;
    };
    const Config configs[] = {{ReadMode::kBuffered, 1, 1}, {ReadMode::kBuffered, 2, 2}, {ReadMode::kBuffered, 4, 2},
                              {ReadMode::kDirect, 2, 1},   {ReadMode::kDirect, 4, 1}};
    std::vector<Row> rows;
    double best_buffered = 0;
    for (const Config& c : configs) {
      const LoadOptions opt{.mode = c.mode, .readers = c.readers};
      for (int run = 1; run <= c.loads; ++run) {
        CUDA_CHECK(cudaMemset(arena.base(), 0xff, arena.bytes()));
        CUDA_CHECK(cudaDeviceSynchronize());
        const LoadReport r = load_weights(path, plan.blob_bytes, arena, opt);
        const std::string why = verify(arena, plan.blob_bytes, want);
        failures += !why.empty();
        rows.push_back({mode_name(r, c.mode), c.readers, "load " + std::to_string(run), r, why.empty() ? "every byte" : "FAIL: " + why});
        if (!r.direct) best_buffered = std::max(best_buffered, r.gbps());
      }
      const LoadReport raw = read_weights(path, plan.blob_bytes, opt);
      rows.push_back({mode_name(raw, c.mode), c.readers, "raw read", raw, "-"});
    }
    print_rows(rows);
    std::printf("\npage cache -> device: best %.2f GB/s, target %.0f GB/s: %s\n", best_buffered, kTargetGbps,
                best_buffered >= kTargetGbps ? "met" : "MISSED");
  } catch (const Error& e) {
    std::printf("FAIL: %s\n", e.what());
    ++failures;
  }
  ::unlink(path.c_str());
  std::printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
