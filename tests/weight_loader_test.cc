// The file half of the H200 weight loader (src/engine/h200/blob_file.h), on CPU: every byte of a
// random file arrives at the offsets asked for, through O_DIRECT and buffered reads; a size that
// disagrees with the plan, a missing file and a file that shrinks mid-load are Errors naming the file
// (and the offset).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/align.h"
#include "core/error.h"
#include "engine/h200/blob_file.h"

namespace fs = std::filesystem;
using namespace rocket;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("rocket_weight_loader_test." + std::to_string(getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<char> random_bytes(uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> v(n);
  for (char& c : v) c = char(rng());
  return v;
}

void write_file(const fs::path& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// Staging memory as O_DIRECT needs it: 4 KiB aligned.
std::unique_ptr<char, FreeDeleter> staging(uint64_t bytes) {
  return std::unique_ptr<char, FreeDeleter>(static_cast<char*>(std::aligned_alloc(4096, bytes)));
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

constexpr uint64_t kChunk = 4 * kAlign;
constexpr uint64_t kFileBytes = 11 * kAlign;  // two whole chunks and a shorter last one

class BlobFileTest : public testing::TestWithParam<ReadMode> {};

TEST_P(BlobFileTest, ReadsEveryChunkAtItsOffset) {
  TempDir dir;
  const fs::path path = dir.path / "weights.blob";
  const std::vector<char> want = random_bytes(kFileBytes, 7);
  write_file(path, want);
  testing::internal::CaptureStderr();
  const BlobFile file(path.string(), kFileBytes, GetParam());
  const std::string log = testing::internal::GetCapturedStderr();
  // Direct reads happen exactly when asked for and allowed; a refusal is said, never silent.
  const bool refused = contains(log, "refuses O_DIRECT");
  EXPECT_EQ(file.direct(), GetParam() == ReadMode::kDirect && !refused) << log;
  EXPECT_EQ(file.size(), kFileBytes);

  // Chunks read out of order into a poisoned buffer land exactly where they belong.
  std::vector<char> got(kFileBytes, char(0x5a));
  auto buf = staging(kChunk);
  for (uint64_t offset : {2 * kChunk, uint64_t(0), kChunk}) {
    const uint64_t bytes = std::min(kChunk, kFileBytes - offset);
    std::memset(buf.get(), 0x5a, kChunk);
    file.read(offset, bytes, buf.get());
    std::memcpy(got.data() + offset, buf.get(), bytes);
  }
  EXPECT_EQ(got, want);
}

TEST_P(BlobFileTest, RefusesASizeOtherThanThePlans) {
  TempDir dir;
  const fs::path path = dir.path / "weights.blob";
  write_file(path, random_bytes(kFileBytes, 8));
  const std::string msg = error_of([&] { BlobFile(path.string(), kFileBytes + kAlign, GetParam()); });
  EXPECT_TRUE(contains(msg, path.string())) << msg;
  EXPECT_TRUE(contains(msg, std::to_string(kFileBytes) + " bytes, the plan says " + std::to_string(kFileBytes + kAlign)))
      << msg;
}

TEST_P(BlobFileTest, NamesAMissingFile) {
  TempDir dir;
  const fs::path path = dir.path / "absent.blob";
  const std::string msg = error_of([&] { BlobFile(path.string(), kFileBytes, GetParam()); });
  EXPECT_TRUE(contains(msg, path.string() + ": cannot open")) << msg;
}

TEST_P(BlobFileTest, AFileThatShrinksIsAShortReadAtItsOffset) {
  TempDir dir;
  const fs::path path = dir.path / "weights.blob";
  write_file(path, random_bytes(kFileBytes, 9));
  const BlobFile file(path.string(), kFileBytes, GetParam());
  // Cut the file in the middle of its second chunk, after it was opened and its size verified.
  fs::resize_file(path, kChunk + 2 * kAlign);
  auto buf = staging(kChunk);
  file.read(0, kChunk, buf.get());  // still whole
  const std::string msg = error_of([&] { file.read(kChunk, kChunk, buf.get()); });
  EXPECT_TRUE(contains(msg, path.string())) << msg;
  EXPECT_TRUE(contains(msg, "short read at offset " + std::to_string(kChunk + 2 * kAlign))) << msg;
  EXPECT_TRUE(contains(msg, std::to_string(2 * kAlign) + " of " + std::to_string(kChunk) + " bytes")) << msg;
}

INSTANTIATE_TEST_SUITE_P(Modes, BlobFileTest, testing::Values(ReadMode::kDirect, ReadMode::kBuffered),
                         [](const auto& info) { return info.param == ReadMode::kDirect ? "Direct" : "Buffered"; });

}  // namespace
