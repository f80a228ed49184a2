#include "fuel/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace rocket {

using nlohmann::json;

namespace {

constexpr std::string_view kMetadataKey = "__metadata__";

// Element count × element width, or false on uint64 overflow (a header can claim any shape).
bool shape_bytes(const std::vector<int64_t>& shape, DType dtype, uint64_t* out) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, uint64_t(d), &n)) return false;
  }
  *out = n;
  return true;
}

std::string shape_str(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Reads one JSON integer that must fit int64; false for floats, strings, and out-of-range values.
bool as_int64(const json& j, int64_t* out) {
  if (j.is_number_unsigned()) {
    uint64_t u = j.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max())) return false;
    *out = int64_t(u);
    return true;
  }
  if (j.is_number_integer()) {
    *out = j.get<int64_t>();
    return true;
  }
  return false;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)) {
  const uint8_t* base = file_->data();
  const uint64_t size = file_->size();
  if (size < 8) fail("{}: not a safetensors file: {} bytes, shorter than the 8-byte header length", path, size);
  const uint64_t header_len = read_le64(base);
  if (header_len > size - 8)
    fail("{}: header length {} runs past the end of the file ({} bytes)", path, header_len, size);
  const uint8_t* buffer = base + 8 + header_len;
  const uint64_t buffer_len = size - 8 - header_len;

  // nlohmann keeps the last of duplicate keys silently; the parser callback sees every key, so a
  // tensor declared twice is caught here. Depth 1 is the top-level object's keys.
  std::set<std::string> seen;
  std::string duplicate;
  json header;
  try {
    header = json::parse(
        base + 8, base + 8 + header_len,
        [&](int depth, json::parse_event_t event, json& parsed) {
          if (event == json::parse_event_t::key && depth == 1 && duplicate.empty() &&
              !seen.insert(parsed.get<std::string>()).second)
            duplicate = parsed.get<std::string>();
          return true;
        });
  } catch (const json::exception& e) {
    fail("{}: header is not valid JSON: {}", path, e.what());
  }
  if (!header.is_object()) fail("{}: header is not a JSON object (found {})", path, header.type_name());
  if (!duplicate.empty()) fail("{}: tensor '{}': declared twice in the header", path, duplicate);

  struct Span { uint64_t begin, end; const std::string* name; };
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    if (name == kMetadataKey) {
      if (!e.is_object()) fail("{}: __metadata__ is not an object (found {})", path, e.type_name());
      for (auto m = e.begin(); m != e.end(); ++m)
        if (!m.value().is_string())
          fail("{}: __metadata__ entry '{}' is not a string (found {})", path, m.key(), m.value().dump());
      metadata_ = e;
      continue;
    }
    auto bad = [&](const std::string& why) { fail("{}: tensor '{}': {}", path, name, why); };
    if (!e.is_object()) bad(fmt::format("entry is not an object (found {})", e.dump()));
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!e.contains(key)) bad(fmt::format("missing '{}'", key));

    const json& jd = e["dtype"];
    if (!jd.is_string()) bad(fmt::format("dtype is not a string (found {})", jd.dump()));
    DType dtype;
    if (!parse_dtype(jd.get<std::string>(), &dtype))
      bad(fmt::format("unknown dtype '{}' (supported: BF16, F16, F32, F8_E4M3, U8, I8, I32, I64)",
                      jd.get<std::string>()));

    const json& js = e["shape"];
    if (!js.is_array()) bad(fmt::format("shape is not an array (found {})", js.dump()));
    std::vector<int64_t> shape;
    for (const json& d : js) {
      int64_t v;
      if (!as_int64(d, &v)) bad(fmt::format("shape {} has a non-integer dimension {}", js.dump(), d.dump()));
      if (v < 0) bad(fmt::format("shape {} has a negative dimension", js.dump()));
      shape.push_back(v);
    }

    const json& jo = e["data_offsets"];
    int64_t begin = 0, end = 0;
    if (!jo.is_array() || jo.size() != 2 || !as_int64(jo[0], &begin) || !as_int64(jo[1], &end))
      bad(fmt::format("data_offsets must be two integers [begin, end] (found {})", jo.dump()));
    if (begin < 0 || end < 0) bad(fmt::format("data_offsets {} are negative", jo.dump()));
    if (begin > end) bad(fmt::format("data_offsets begin {} > end {}", begin, end));
    if (uint64_t(end) > buffer_len)
      bad(fmt::format("data_offsets [{}, {}] run past the end of the data buffer ({} bytes)", begin, end,
                      buffer_len));

    uint64_t expected;
    if (!shape_bytes(shape, dtype, &expected)) bad(fmt::format("shape {} overflows 64-bit size", shape_str(shape)));
    const uint64_t nbytes = uint64_t(end - begin);
    if (nbytes != expected)
      bad(fmt::format("holds {} bytes but {} {} needs {}", nbytes, dtype_name(dtype), shape_str(shape), expected));

    auto [slot, inserted] = tensors_.emplace(
        name, TensorView{.name = name, .dtype = dtype, .shape = std::move(shape), .data = buffer + begin, .nbytes = nbytes});
    spans.push_back({uint64_t(begin), uint64_t(end), &slot->first});
  }

  // The tensors must tile [0, buffer_len) exactly: walk them in offset order.
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t cursor = 0;
  const std::string* prev = nullptr;
  for (const Span& s : spans) {
    if (s.begin < cursor)
      fail("{}: tensor '{}': bytes [{}, {}) overlap tensor '{}' (which ends at {})", path, *s.name, s.begin, s.end,
           *prev, cursor);
    if (s.begin > cursor)
      fail("{}: tensor '{}': starts at {} leaving a hole of {} unindexed bytes after {}", path, *s.name, s.begin,
           s.begin - cursor, prev ? fmt::format("tensor '{}'", *prev) : std::string("the header"));
    cursor = s.end;
    prev = s.name;
  }
  if (cursor != buffer_len)
    fail("{}: {} unindexed bytes after {} (data buffer is {} bytes)", path, buffer_len - cursor,
         prev ? fmt::format("tensor '{}'", *prev) : std::string("the header"), buffer_len);
}

// ---------------------------------------------------------------------------------------------------
// Writer

namespace {
constexpr size_t kWriteBuffer = 8u << 20;  // coalesces the many small norm/bias tensors into large writes
}

uint64_t SafetensorsWriter::Entry::nbytes() const {
  uint64_t n = 0;
  CHECK(shape_bytes(shape, dtype, &n), fmt::format("tensor '{}' shape overflows", name));
  return n;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<Entry> entries,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), entries_(std::move(entries)) {
  // A plain (sorted) json object: ordered_json looks keys up linearly, quadratic for the ~10^5
  // tensors of a large checkpoint. Header order carries no meaning; offsets do.
  json header = json::object();
  if (!metadata.empty()) {
    json m = json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header[std::string(kMetadataKey)] = std::move(m);
  }
  uint64_t offset = 0;
  for (const Entry& e : entries_) {
    CHECK(e.name != kMetadataKey && !header.contains(e.name), fmt::format("tensor name '{}' repeated or reserved", e.name));
    for (int64_t d : e.shape) CHECK(d >= 0, fmt::format("tensor '{}' has a negative dimension", e.name));
    const uint64_t n = e.nbytes();
    header[e.name] = {{"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  // Pad with spaces (valid JSON whitespace) so the data buffer starts 8-byte aligned, as HF does.
  text.append((8 - text.size() % 8) % 8, ' ');
  data_bytes_ = offset;
  header_bytes_ = 8 + text.size();

  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot create: {}", path, std::strerror(errno));
  buf_.resize(kWriteBuffer);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  put(len, 8);
  put(text.data(), text.size());
}

SafetensorsWriter::SafetensorsWriter(SafetensorsWriter&& o) noexcept
    : path_(std::move(o.path_)), entries_(std::move(o.entries_)), fd_(o.fd_), next_(o.next_),
      written_in_next_(o.written_in_next_), header_bytes_(o.header_bytes_), data_bytes_(o.data_bytes_),
      buf_(std::move(o.buf_)), buf_used_(o.buf_used_), finished_(o.finished_) {
  o.fd_ = -1;
  o.finished_ = true;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  if (!finished_) ::unlink(path_.c_str());  // a partial file would only fail later, at load
}

void SafetensorsWriter::write(const std::string& name, const void* data, uint64_t nbytes) {
  CHECK(!finished_ && next_ < entries_.size(), fmt::format("write of '{}' after every tensor of {} was written", name, path_));
  CHECK(written_in_next_ == 0 && nbytes == entries_[next_].nbytes(),
        fmt::format("write of '{}' with {} bytes; a whole-tensor write of '{}' needs {}", name, nbytes,
                    entries_[next_].name, entries_[next_].nbytes()));
  write_part(name, data, nbytes);
}

void SafetensorsWriter::write_part(const std::string& name, const void* data, uint64_t nbytes) {
  CHECK(!finished_ && next_ < entries_.size(), fmt::format("write of '{}' after every tensor of {} was written", name, path_));
  const Entry& e = entries_[next_];
  CHECK(name == e.name, fmt::format("write of '{}' out of order: '{}' comes next in {}", name, e.name, path_));
  const uint64_t want = e.nbytes();
  CHECK(written_in_next_ + nbytes <= want,
        fmt::format("write of '{}' overruns it: {} + {} bytes > {}", name, written_in_next_, nbytes, want));
  put(data, nbytes);
  written_in_next_ += nbytes;
  if (written_in_next_ == want) {
    ++next_;
    written_in_next_ = 0;
  }
}

void SafetensorsWriter::finish() {
  CHECK(!finished_, fmt::format("finish() twice on {}", path_));
  // Zero-byte tensors at the tail need no write() call to be complete.
  while (next_ < entries_.size() && written_in_next_ == 0 && entries_[next_].nbytes() == 0) ++next_;
  CHECK(next_ == entries_.size(),
        fmt::format("finish() on {} with tensor '{}' ({} of {}) unwritten", path_,
                    next_ < entries_.size() ? entries_[next_].name : "", next_, entries_.size()));
  flush();
  const int fd = fd_;
  fd_ = -1;
  finished_ = true;
  if (::close(fd) != 0) fail("{}: close failed: {}", path_, std::strerror(errno));
  buf_ = {};
}

void SafetensorsWriter::put(const void* data, uint64_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (n >= buf_.size()) {  // large tensors go straight to the kernel, no copy
    flush();
    write_all(p, n);
    return;
  }
  if (buf_used_ + n > buf_.size()) flush();
  std::memcpy(buf_.data() + buf_used_, p, n);
  buf_used_ += n;
}

void SafetensorsWriter::flush() {
  write_all(buf_.data(), buf_used_);
  buf_used_ = 0;
}

void SafetensorsWriter::write_all(const uint8_t* p, uint64_t n) {
  while (n > 0) {
    // Linux caps one write at ~2 GiB; chunk explicitly so the loop is the only retry path.
    const size_t chunk = size_t(std::min<uint64_t>(n, 1ull << 30));
    ssize_t w = ::write(fd_, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("{}: write failed: {}", path_, std::strerror(errno));
    }
    p += w;
    n -= uint64_t(w);
  }
}

}  // namespace rocket
