#include "core/staged_dir.h"

#include <unistd.h>

#include "core/error.h"

namespace fs = std::filesystem;

namespace rocket {

StagedDir::StagedDir(const fs::path& final_path, bool replace) : final_(fs::absolute(final_path)) {
  if (fs::exists(final_) && !replace && !(fs::is_directory(final_) && fs::is_empty(final_)))
    fail("{}: already exists and is not empty (pass --force to replace it)", final_.string());
  tmp_ = final_;
  tmp_ += ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp_, ec);
  fs::create_directories(tmp_, ec);
  if (ec) fail("{}: cannot create: {}", tmp_.string(), ec.message());
}

StagedDir::~StagedDir() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void StagedDir::commit() {
  std::error_code ec;
  fs::remove_all(final_, ec);
  fs::rename(tmp_, final_, ec);
  if (ec) fail("{}: cannot rename into place: {}", final_.string(), ec.message());
  committed_ = true;
}

}  // namespace rocket
