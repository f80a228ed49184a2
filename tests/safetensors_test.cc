#include <gtest/gtest.h>

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fuel/safetensors.h"

namespace rocket {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "rocket_st_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A file with exactly this header text and `data_bytes` bytes of buffer: the corrupt-file cases
  // are written by hand so the writer's own checks cannot mask them.
  std::string raw(const std::string& name, const std::string& header, size_t data_bytes) const {
    std::string p = path(name);
    std::ofstream out(p, std::ios::binary);
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out.put(char(n >> (8 * i)));
    out << header << std::string(data_bytes, '\x5a');
    return p;
  }

  // Opens `p` expecting an Error whose message names the file and every one of `needles`.
  static void expect_refused(const std::string& p, std::initializer_list<std::string> needles) {
    try {
      SafetensorsFile f(p);
      FAIL() << "accepted " << p;
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(p), std::string::npos) << msg;
      for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    }
  }

  fs::path dir_;
};

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

TEST_F(SafetensorsTest, RoundTripsEveryDtypeBitwise) {
  std::vector<SafetensorsWriter::Entry> entries = {
      {"a.bf16", DType::kBF16, {3, 5}},   {"b.f16", DType::kF16, {7}},     {"c.f32", DType::kF32, {2, 3, 4}},
      {"d.e4m3", DType::kF8E4M3, {9, 16}}, {"e.u8", DType::kU8, {4, 8}},    {"f.i8", DType::kI8, {13}},
      {"g.i32", DType::kI32, {6}},         {"h.i64", DType::kI64, {1, 3}},  {"i.scalar", DType::kF32, {}},
      {"j.empty", DType::kBF16, {0, 4}},
  };
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < entries.size(); ++i) data.push_back(random_bytes(entries[i].nbytes(), 100 + i));
  const std::string p = path("all.safetensors");
  SafetensorsWriter w(p, entries, {{"format", "pt"}, {"producer", "rocket test"}});
  for (size_t i = 0; i < entries.size(); ++i) w.write(entries[i].name, data[i].data(), data[i].size());
  w.finish();
  EXPECT_EQ(fs::file_size(p), w.total_bytes());

  SafetensorsFile f(p);
  ASSERT_EQ(f.tensors().size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorView& v = f.tensors().at(entries[i].name);
    EXPECT_EQ(v.name, entries[i].name);
    EXPECT_EQ(v.dtype, entries[i].dtype) << v.name;
    EXPECT_EQ(v.shape, entries[i].shape) << v.name;
    ASSERT_EQ(v.nbytes, data[i].size()) << v.name;
    EXPECT_EQ(std::memcmp(v.data, data[i].data(), v.nbytes), 0) << v.name;
  }
  EXPECT_EQ(f.metadata(), (json{{"format", "pt"}, {"producer", "rocket test"}}));

  // HF pads the header so the buffer starts 8-byte aligned; so does the writer.
  uint64_t header_len = 0;
  std::ifstream in(p, std::ios::binary);
  in.read(reinterpret_cast<char*>(&header_len), 8);
  EXPECT_EQ(header_len % 8, 0u);
}

TEST_F(SafetensorsTest, NoMetadataReadsAsEmptyObject) {
  const std::string p = path("m.safetensors");
  SafetensorsWriter w(p, {{"x", DType::kF32, {2}}});
  float v[2] = {1.5f, -2.0f};
  w.write("x", v, sizeof v);
  w.finish();
  SafetensorsFile f(p);
  EXPECT_TRUE(f.metadata().is_object());
  EXPECT_TRUE(f.metadata().empty());
  float back[2];
  std::memcpy(back, f.tensors().at("x").data, sizeof back);
  EXPECT_EQ(back[0], 1.5f);
  EXPECT_EQ(back[1], -2.0f);
}

TEST_F(SafetensorsTest, StreamsLargeTensorsInPartsPastTheWriteBuffer) {
  // 9 MiB exceeds the writer's 8 MiB coalescing buffer, exercising the direct-write path between
  // buffered small tensors.
  const uint64_t big = 9ull << 20;
  auto a = random_bytes(100, 1), b = random_bytes(big, 2), c = random_bytes(3, 3);
  const std::string p = path("big.safetensors");
  SafetensorsWriter w(p, {{"a", DType::kU8, {100}}, {"b", DType::kU8, {int64_t(big)}}, {"c", DType::kI8, {3}}});
  w.write("a", a.data(), a.size());
  const uint64_t first = 5'000'001;  // odd split: parts need not be element-aligned
  w.write_part("b", b.data(), first);
  w.write_part("b", b.data() + first, big - first);
  w.write("c", c.data(), c.size());
  w.finish();
  SafetensorsFile f(p);
  EXPECT_EQ(std::memcmp(f.tensors().at("a").data, a.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(f.tensors().at("b").data, b.data(), big), 0);
  EXPECT_EQ(std::memcmp(f.tensors().at("c").data, c.data(), c.size()), 0);
}

TEST_F(SafetensorsTest, UnfinishedWriterRemovesItsPartialFile) {
  const std::string p = path("partial.safetensors");
  {
    SafetensorsWriter w(p, {{"a", DType::kU8, {4}}, {"b", DType::kU8, {4}}});
    uint8_t x[4] = {};
    w.write("a", x, 4);
    EXPECT_TRUE(fs::exists(p));
  }
  EXPECT_FALSE(fs::exists(p));
}

TEST_F(SafetensorsTest, MovedFileKeepsViewsValid) {
  const std::string p = path("mv.safetensors");
  SafetensorsWriter w(p, {{"a", DType::kI32, {1}}});
  int32_t v = 0x12345678;
  w.write("a", &v, 4);
  w.finish();
  SafetensorsFile f(p);
  const uint8_t* before = f.tensors().at("a").data;
  SafetensorsFile g(std::move(f));
  EXPECT_EQ(g.tensors().at("a").data, before);
  int32_t back;
  std::memcpy(&back, before, 4);
  EXPECT_EQ(back, v);
}

using SafetensorsDeathTest = SafetensorsTest;

TEST_F(SafetensorsDeathTest, WriterChecksOrderSizeAndCompleteness) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  uint8_t x[8] = {};
  EXPECT_DEATH(
      {
        SafetensorsWriter w(path("o.safetensors"), {{"a", DType::kU8, {4}}, {"b", DType::kU8, {4}}});
        w.write("b", x, 4);
      },
      "out of order");
  EXPECT_DEATH(
      {
        SafetensorsWriter w(path("s.safetensors"), {{"a", DType::kU8, {4}}});
        w.write("a", x, 8);
      },
      "needs 4");
  EXPECT_DEATH(
      {
        SafetensorsWriter w(path("f.safetensors"), {{"a", DType::kU8, {4}}, {"b", DType::kU8, {4}}});
        w.write("a", x, 4);
        w.finish();
      },
      "unwritten");
}

// --- Refusals: one per malformation, each naming the file and (where there is one) the tensor. ---

TEST_F(SafetensorsTest, RefusesFileShorterThanEightBytes) {
  const std::string p = path("short.safetensors");
  std::ofstream(p, std::ios::binary) << "abc";
  expect_refused(p, {"3 bytes", "shorter than"});
}

TEST_F(SafetensorsTest, RefusesHeaderLengthPastEndOfFile) {
  const std::string p = path("hdr.safetensors");
  {
    std::ofstream out(p, std::ios::binary);
    uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  expect_refused(p, {"header length 1000", "10 bytes"});
}

TEST_F(SafetensorsTest, RefusesInvalidJson) {
  expect_refused(raw("bad.safetensors", R"({"a": {"dtype": "F32",)", 0), {"not valid JSON"});
}

TEST_F(SafetensorsTest, RefusesNonObjectHeader) {
  expect_refused(raw("arr.safetensors", "[1, 2]", 0), {"not a JSON object", "array"});
}

TEST_F(SafetensorsTest, RefusesEntryThatIsNotAnObject) {
  expect_refused(raw("e.safetensors", R"({"w": [1, 2]})", 0), {"'w'", "not an object"});
}

TEST_F(SafetensorsTest, RefusesMissingFields) {
  expect_refused(raw("nd.safetensors", R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", 8), {"'w'", "missing 'dtype'"});
  expect_refused(raw("ns.safetensors", R"({"w": {"dtype": "F32", "data_offsets": [0, 8]}})", 8), {"'w'", "missing 'shape'"});
  expect_refused(raw("no.safetensors", R"({"w": {"dtype": "F32", "shape": [2]}})", 8), {"'w'", "missing 'data_offsets'"});
}

TEST_F(SafetensorsTest, RefusesFieldsOfTheWrongType) {
  expect_refused(raw("t1.safetensors", R"({"w": {"dtype": 7, "shape": [2], "data_offsets": [0, 8]}})", 8),
                 {"'w'", "dtype is not a string"});
  expect_refused(raw("t2.safetensors", R"({"w": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}})", 8),
                 {"'w'", "shape is not an array"});
  expect_refused(raw("t3.safetensors", R"({"w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})", 8),
                 {"'w'", "non-integer dimension"});
  expect_refused(raw("t4.safetensors", R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", 8),
                 {"'w'", "data_offsets must be two integers"});
  expect_refused(raw("t5.safetensors", R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": ["0", "8"]}})", 8),
                 {"'w'", "data_offsets must be two integers"});
  expect_refused(raw("t6.safetensors", R"({"__metadata__": {"format": 1}})", 0), {"__metadata__", "'format'"});
}

TEST_F(SafetensorsTest, RefusesUnknownDtype) {
  expect_refused(raw("dt.safetensors", R"({"w": {"dtype": "F8_E5M2", "shape": [2], "data_offsets": [0, 2]}})", 2),
                 {"'w'", "unknown dtype 'F8_E5M2'"});
}

TEST_F(SafetensorsTest, RefusesNegativeDimension) {
  expect_refused(raw("neg.safetensors", R"({"w": {"dtype": "U8", "shape": [-2], "data_offsets": [0, 2]}})", 2),
                 {"'w'", "negative dimension"});
}

TEST_F(SafetensorsTest, RefusesOffsetsPastTheBuffer) {
  expect_refused(raw("oob.safetensors", R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8),
                 {"'w'", "past the end of the data buffer (8 bytes)"});
}

TEST_F(SafetensorsTest, RefusesBeginAfterEnd) {
  expect_refused(raw("be.safetensors", R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [8, 4]}})", 8),
                 {"'w'", "begin 8 > end 4"});
}

TEST_F(SafetensorsTest, RefusesSizeThatDisagreesWithShape) {
  expect_refused(raw("sz.safetensors", R"({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}})", 8),
                 {"'w'", "holds 8 bytes", "BF16 [3] needs 6"});
}

TEST_F(SafetensorsTest, RefusesOverlappingTensors) {
  expect_refused(raw("ov.safetensors",
                     R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
                         "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}})",
                     12),
                 {"'b'", "overlap tensor 'a'"});
}

TEST_F(SafetensorsTest, RefusesHolesBetweenTensors) {
  expect_refused(raw("hole.safetensors",
                     R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                         "b": {"dtype": "U8", "shape": [4], "data_offsets": [8, 12]}})",
                     12),
                 {"'b'", "hole of 4 unindexed bytes after tensor 'a'"});
  expect_refused(raw("lead.safetensors", R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})", 8),
                 {"'a'", "hole of 4 unindexed bytes after the header"});
}

TEST_F(SafetensorsTest, RefusesTrailingBytesAfterTheLastTensor) {
  expect_refused(raw("tail.safetensors", R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})", 6),
                 {"2 unindexed bytes after tensor 'a'"});
}

TEST_F(SafetensorsTest, RefusesDuplicateNames) {
  expect_refused(raw("dup.safetensors",
                     R"({"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                         "w": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})",
                     8),
                 {"'w'", "declared twice"});
}

TEST_F(SafetensorsTest, AcceptsHandWrittenUnpaddedHeader) {
  // Other writers need not pad the header; only the spec's invariants matter.
  const std::string p = raw("ok.safetensors", R"({"a":{"dtype":"I8","shape":[2,2],"data_offsets":[0,4]}})", 4);
  SafetensorsFile f(p);
  EXPECT_EQ(f.tensors().at("a").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(f.tensors().at("a").data[0], 0x5a);
}

}  // namespace
}  // namespace rocket
