// Stop strings (`stop`) over a streamed output: text goes in piece by piece, and only text that can no
// longer be part of a stop string comes out. A tail that could begin a stop string is held until the
// next piece decides it, so a stop string never reaches the client, also when it is split across
// tokens; the output ends right before the first stop string to appear.
//
// Pieces are whole UTF-8 (from StreamDecoder) and a held tail starts where a stop string starts, at a
// character boundary, so what comes out is whole UTF-8 too.
//
// Not thread-safe: one per response.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rocket {

class StopMatcher {
 public:
  // Empty strings are ignored (the request parser refuses them).
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to emit
    bool stopped = false;  // a stop string was hit: `text` ends right before it; generation ends
  };

  // REQUIRES: not stopped yet.
  Result push(std::string_view piece);

  // The stream ended without a stop string: the held tail is output after all.
  std::string flush();

  bool stopped() const { return stopped_; }
  // The stop string that was hit (the earliest in the text; of two there, the first given).
  const std::string& matched() const { return matched_; }
  // Bytes held back, awaiting the next piece.
  size_t held() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace rocket
