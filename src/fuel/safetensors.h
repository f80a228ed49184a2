// Safetensors: the on-disk tensor container of HF checkpoints.
//
// File = u64 little-endian header length N, N bytes of JSON header, then the byte buffer. The header
// maps each tensor name to {dtype, shape, data_offsets: [begin, end)} relative to the buffer, plus an
// optional "__metadata__" object of string values. The spec requires the tensors to tile the buffer
// exactly (no overlap, no hole, nothing after the last tensor); the reader enforces all of it, so a
// truncated or hand-edited shard is refused at load rather than read as garbage later.
//
// TensorView::data points into the mapping and is only as aligned as the writer made it (offsets
// are not required to be multiples of the element size): read elements with memcpy.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace rocket {

struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t* data;  // into the owning file's mapping; valid while that file lives
  uint64_t nbytes;
};

// A validated, memory-mapped safetensors file. Move-only; views stay valid across moves.
class SafetensorsFile {
 public:
  // Error naming the file (and the tensor) on any malformation listed in the file comment.
  explicit SafetensorsFile(const std::string& path);
  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const nlohmann::json& metadata() const { return metadata_; }  // "__metadata__", or an empty object
  const std::string& path() const { return file_->path(); }
  uint64_t file_size() const { return file_->size(); }

 private:
  std::unique_ptr<MappedFile> file_;  // behind a pointer so the file is move-assignable
  std::map<std::string, TensorView> tensors_;
  nlohmann::json metadata_ = nlohmann::json::object();
};

// Streams a safetensors file of known layout: the header is written by the constructor, then each
// tensor's bytes in the declared order, so a multi-GB shard never has to sit in memory.
// Calling write() out of order, with the wrong size, or after finish() is a programming error
// (CHECK). I/O failures (disk full, permissions) are Errors naming the path. A writer destroyed
// without finish() removes its partial file.
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t nbytes() const;
  };

  SafetensorsWriter(const std::string& path, std::vector<Entry> entries,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(SafetensorsWriter&& o) noexcept;
  SafetensorsWriter& operator=(SafetensorsWriter&&) = delete;
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // REQUIRES: `name` is the next unwritten tensor and nbytes is its full size.
  void write(const std::string& name, const void* data, uint64_t nbytes);
  // Streams one tensor in pieces: successive calls for the same `name` append, and the tensor is
  // complete once its full size has arrived. REQUIRES: `name` is the tensor in progress or the next.
  void write_part(const std::string& name, const void* data, uint64_t nbytes);
  // REQUIRES: every tensor written in full. Flushes and closes; Error on I/O failure.
  void finish();

  uint64_t total_bytes() const { return header_bytes_ + data_bytes_; }  // the finished file's size

 private:
  void put(const void* data, uint64_t n);
  void flush();
  void write_all(const uint8_t* p, uint64_t n);

  std::string path_;
  std::vector<Entry> entries_;
  int fd_ = -1;
  size_t next_ = 0;             // index of the tensor being written
  uint64_t written_in_next_ = 0;
  uint64_t header_bytes_ = 0, data_bytes_ = 0;
  std::vector<uint8_t> buf_;    // small tensors coalesce here; large ones bypass it
  size_t buf_used_ = 0;
  bool finished_ = false;
};

}  // namespace rocket
