// `rocket-engine profile` on the host booster: runs the fuel over a corpus (engine/corpus.h) and
// writes its co-activation profile (fuel/coactivation.h), the input of `rocket build --coactivation`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace rocket {

int cmd_profile(const std::filesystem::path& engine_dir, const std::vector<std::string>& args);

}  // namespace rocket
