// Writes a directory under a temporary name and renames it into place on commit(), so a failed or
// interrupted forge/build never leaves a half-written output behind. An uncommitted StagedDir removes
// its temporary tree on destruction.
#pragma once

#include <filesystem>
#include <string>

namespace rocket {

class StagedDir {
 public:
  // Refuses (Error) if `final_path` exists and is not empty, unless `replace` is set.
  StagedDir(const std::filesystem::path& final_path, bool replace);
  ~StagedDir();
  StagedDir(const StagedDir&) = delete;
  StagedDir& operator=(const StagedDir&) = delete;

  const std::filesystem::path& path() const { return tmp_; }  // write here
  void commit();

 private:
  std::filesystem::path final_, tmp_;
  bool committed_ = false;
};

}  // namespace rocket
