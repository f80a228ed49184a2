// The keys a server accepts on /v1/*: from --api-key, from --api-key-file (one per line, so a key need
// not appear in `ps` or the shell's history) and from the ROCKET_API_KEY environment variable, all at
// once. A request's bearer token is compared with every key in time that depends only on the token's
// length, never on how much of a key it matches.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rocket {

class ApiKeys {
 public:
  ApiKeys() = default;
  // `flag`: --api-key's value ("" = none); `file`: --api-key-file's path ("" = none), read now: one
  // key per line, surrounding blanks trimmed, empty lines and lines starting with '#' skipped; `env`:
  // ROCKET_API_KEY's value (nullptr = unset). Error (naming the file) when the file cannot be read or
  // holds no key, or a key has blanks or control characters inside it.
  static ApiKeys load(const std::string& flag, const std::string& file, const char* env);

  // No keys: the server is open.
  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }
  // Whether an "Authorization" header value is "Bearer " followed by one of the keys.
  bool accepts(std::string_view authorization) const;

 private:
  void add(std::string key, const std::string& where);
  std::vector<std::string> keys_;
};

}  // namespace rocket
