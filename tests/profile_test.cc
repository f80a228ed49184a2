#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "boosters/profile.h"
#include "core/error.h"
#ifdef ROCKET_HAVE_CUDA
#include "kernels/cuda/primitives/cuda_check.h"
#endif

namespace rocket {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Figures of the H200 the design quotes; nothing here is all zeros or all equal.
HardwareProfile sample_h200() {
  HardwareProfile p;
  p.booster = "h200";
  p.device_name = "NVIDIA H200";
  p.compute_capability = "9.0";
  p.sm_count = 132;
  p.l2_bytes = 60 * kMiB;
  p.smem_per_block_optin = 227 * 1024;
  p.memory_total = 150'121'545'728;
  p.memory_free = 149'539'635'200;
  p.reserve = 270 * kMiB;
  p.floor = kH200Floor;
  p.copy_gbps = 4290.25;
  p.cores = 16;
  p.page_size = 4096;
  p.driver_version = "13.0";
  p.runtime_version = "13.0";
  p.measured_at = "2025-06-01T12:00:00Z";
  p.host = "gpu-node-7";
  return p;
}

// A scratch directory removed at the end of the test.
struct TempDir {
  fs::path path = fs::temp_directory_path() / fmt::format("rocket_profile_test.{}", getpid());
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// The message of the Error `f` throws, or "" when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Profile, JsonRoundTripKeepsEveryField) {
  HardwareProfile p = sample_h200();
  json j = p;
  HardwareProfile q = json::parse(j.dump()).get<HardwareProfile>();
  EXPECT_EQ(json(q), j);
  EXPECT_EQ(q.memory_free, p.memory_free);
  EXPECT_EQ(q.copy_gbps, p.copy_gbps);
  EXPECT_EQ(q.host, p.host);
}

TEST(Profile, SaveThenLoadRoundTrips) {
  TempDir dir;
  const fs::path file = dir.path / "h200.json";
  save_profile(sample_h200(), file);
  EXPECT_EQ(json(load_profile(file)), json(sample_h200()));
  // Overwrites in place and leaves no temporary file behind.
  HardwareProfile other = sample_h200();
  other.memory_free -= 12345;
  save_profile(other, file);
  EXPECT_EQ(load_profile(file).memory_free, other.memory_free);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}), 1);
}

TEST(Profile, UsableBytesIsFreeMinusReserveMinusFloor) {
  HardwareProfile p = sample_h200();
  EXPECT_EQ(p.usable_bytes(), p.memory_free - p.reserve - p.floor);
  p.memory_free = 10 * kGiB + 7;
  p.reserve = 3 * kGiB;
  p.floor = 2 * kGiB;
  EXPECT_EQ(p.usable_bytes(), 5 * kGiB + 7);
}

TEST(Profile, UsableBytesIsZeroWhenReserveAndFloorExceedFree) {
  HardwareProfile p = sample_h200();
  p.memory_free = 3 * kGiB;
  p.reserve = 2 * kGiB;
  p.floor = kGiB + 1;
  EXPECT_EQ(p.usable_bytes(), 0u);
  p.floor = kGiB;  // exactly exhausted
  EXPECT_EQ(p.usable_bytes(), 0u);
  p.reserve = UINT64_MAX;  // the sum would wrap around
  EXPECT_EQ(p.usable_bytes(), 0u);
}

TEST(Profile, LoadNamesTheFileAndTheMissingField) {
  TempDir dir;
  const fs::path file = dir.path / "broken.json";
  json j = sample_h200();
  j.erase("reserve");
  write_text(file, j.dump());
  std::string msg = error_of([&] { load_profile(file); });
  EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("'reserve'"), std::string::npos) << msg;
}

TEST(Profile, LoadNamesTheFieldWithTheWrongTypeOrValue) {
  TempDir dir;
  const fs::path file = dir.path / "bad.json";
  struct Case {
    const char* field;
    json value;
  };
  for (const Case& c : {Case{"memory_free", "lots"}, Case{"floor", -1}, Case{"copy_gbps", 0},
                        Case{"booster", "tpu"}, Case{"sm_count", 0}, Case{"memory_free", 200'000'000'000ull},
                        Case{"schema", 2}, Case{"compute_capability", "8.0"}}) {
    json j = sample_h200();
    j[c.field] = c.value;
    write_text(file, j.dump());
    std::string msg = error_of([&] { load_profile(file); });
    EXPECT_NE(msg.find(file.string()), std::string::npos) << c.field << ": " << msg;
    EXPECT_NE(msg.find(std::string("'") + c.field + "'"), std::string::npos) << c.field << ": " << msg;
  }
}

TEST(Profile, LoadRefusesMissingFileAndInvalidJson) {
  TempDir dir;
  std::string msg = error_of([&] { load_profile(dir.path / "absent.json"); });
  EXPECT_NE(msg.find("absent.json"), std::string::npos) << msg;
  write_text(dir.path / "trunc.json", R"({"schema": 1, "booster": )");
  msg = error_of([&] { load_profile(dir.path / "trunc.json"); });
  EXPECT_NE(msg.find("trunc.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST(Profile, ProbeHostMeasuresSaneValues) {
  // 64 MiB rather than the default 1 GiB: first-touch faults cost up to 10 s per GiB on the CI VM.
  HardwareProfile p = probe_host(64 * kMiB);
  EXPECT_EQ(p.booster, "host");
  EXPECT_GT(p.memory_total, 0u);
  EXPECT_GT(p.memory_free, 0u);
  EXPECT_LE(p.memory_free, p.memory_total);
  EXPECT_EQ(p.reserve, 0u);
  EXPECT_EQ(p.floor, kHostFloor);
  // Any x86-64 machine of the last decade copies faster than 1 GB/s and slower than 10 TB/s.
  EXPECT_GT(p.copy_gbps, 1.0);
  EXPECT_LT(p.copy_gbps, 10000.0);
  EXPECT_GE(p.cores, 1);
  EXPECT_GE(p.page_size, 4096u);
  EXPECT_EQ(p.page_size & (p.page_size - 1), 0u);
  EXPECT_EQ(p.measured_at.size(), 20u) << p.measured_at;
  EXPECT_FALSE(p.host.empty());
  // What it measured is a loadable profile.
  EXPECT_EQ(json(json(p).get<HardwareProfile>()), json(p));
  EXPECT_FALSE(describe_profile(p).empty());
}

TEST(Profile, ProbeMainRefusesBadUsage) {
  EXPECT_EQ(probe_main({"--help"}), 0);
  EXPECT_EQ(probe_main({}), 2);
  EXPECT_EQ(probe_main({"--booster"}), 2);
  EXPECT_EQ(probe_main({"--booster", "tpu"}), 2);
  EXPECT_EQ(probe_main({"--booster", "host", "--bogus"}), 2);
}

#ifdef ROCKET_HAVE_CUDA
TEST(Profile, CudaCheckNamesCallFileAndError) {
  EXPECT_TRUE(cuda_compiled_in());
  std::string msg = error_of([] { CUDA_CHECK(cudaErrorInvalidValue); });
  EXPECT_NE(msg.find("profile_test.cc"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cudaErrorInvalidValue"), std::string::npos) << msg;
}

// On a machine with an sm_90 GPU this measures it; without one (CI) it must refuse with a clear reason.
TEST(Profile, ProbeH200MeasuresOrRefusesCleanly) {
  HardwareProfile p;
  std::string msg = error_of([&] { p = probe_h200(); });
  if (!msg.empty()) {
    EXPECT_TRUE(msg.starts_with("no CUDA device: ") || msg.starts_with("booster h200 needs compute capability"))
        << msg;
    return;
  }
  EXPECT_EQ(p.booster, "h200");
  EXPECT_GT(p.sm_count, 0);
  EXPECT_GT(p.l2_bytes, 0u);
  EXPECT_GT(p.smem_per_block_optin, 48u * 1024);
  EXPECT_GE(p.reserve, kH200Workspace);
  EXPECT_EQ(p.reserve % (64 * 1024), 0u);
  EXPECT_GT(p.usable_bytes(), 0u);
  EXPECT_GT(p.copy_gbps, 100.0);
  EXPECT_EQ(json(json(p).get<HardwareProfile>()), json(p));
}
#else
TEST(Profile, ProbeMainRefusesH200WithoutCuda) {
  EXPECT_FALSE(cuda_compiled_in());
  EXPECT_EQ(probe_main({"--booster", "h200"}), 1);
}
#endif

}  // namespace
}  // namespace rocket
