#include "http/api_keys.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace rocket {

namespace {

std::string trim_key(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// Equal in time that depends only on token.size(): every byte of the token is compared (against the
// key repeated), and the length difference is folded into the same accumulator.
bool same_key(std::string_view token, const std::string& key) {
  unsigned diff = unsigned(token.size() ^ key.size());
  for (size_t i = 0; i < token.size(); ++i) diff |= unsigned(uint8_t(token[i]) ^ uint8_t(key[i % key.size()]));
  return diff == 0;
}

}  // namespace

void ApiKeys::add(std::string key, const std::string& where) {
  for (char c : key)
    if (uint8_t(c) <= 0x20 || c == 0x7f) fail("{}: an API key has a blank or control character inside it", where);
  keys_.push_back(std::move(key));
}

ApiKeys ApiKeys::load(const std::string& flag, const std::string& file, const char* env) {
  ApiKeys k;
  if (!flag.empty()) k.add(trim_key(flag), "--api-key");
  if (env && *env) k.add(trim_key(env), "ROCKET_API_KEY");
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) fail("--api-key-file {}: cannot be read", file);
    const size_t before = k.keys_.size();
    std::string line;
    while (std::getline(in, line)) {
      std::string key = trim_key(line);
      if (key.empty() || key[0] == '#') continue;
      k.add(std::move(key), "--api-key-file " + file);
    }
    if (in.bad()) fail("--api-key-file {}: read error", file);
    if (k.keys_.size() == before) fail("--api-key-file {}: holds no key (one per line; '#' starts a comment)", file);
  }
  return k;
}

bool ApiKeys::accepts(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return false;
  const std::string_view token = authorization.substr(kBearer.size());
  // Every key is tried, so the time does not tell which one (or whether any) matched.
  bool ok = false;
  for (const std::string& key : keys_) ok |= same_key(token, key);
  return ok;
}

}  // namespace rocket
