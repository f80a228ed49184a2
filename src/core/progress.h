// A one-line progress meter on stderr for long steps (forging, conditioning, building).
// On a terminal it redraws in place at most every 200 ms; into a log (CI) it prints a line every
// 10 s, so logs stay short. A final line gives the elapsed time. Not thread-safe: one owner thread
// calls advance().
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include <unistd.h>

namespace rocket {

class Progress {
 public:
  Progress(std::string label, uint64_t total) : label_(std::move(label)), total_(total) {}
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(uint64_t n) {
    done_ += n;
    auto now = Clock::now();
    if (now - last_ < (tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(10000))) return;
    last_ = now;
    std::fprintf(stderr, tty_ ? "\r%s %5.1f%% (%s / %s)" : "%s %5.1f%% (%s / %s)\n", label_.c_str(),
                 total_ ? 100.0 * done_ / total_ : 100.0, human(done_).c_str(), human(total_).c_str());
    std::fflush(stderr);
  }

  void finish() {
    if (finished_) return;
    finished_ = true;
    double s = std::chrono::duration<double>(Clock::now() - start_).count();
    std::fprintf(stderr, tty_ ? "\r%s done: %s in %.1f s\n" : "%s done: %s in %.1f s\n", label_.c_str(), human(done_).c_str(), s);
  }

  static std::string human(uint64_t bytes) {
    char buf[32];
    if (bytes >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1ull << 30));
    else if (bytes >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / double(1ull << 20));
    else std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
    return buf;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  uint64_t total_, done_ = 0;
  Clock::time_point start_ = Clock::now(), last_ = start_;
  bool finished_ = false;
  bool tty_ = ::isatty(2) != 0;
};

}  // namespace rocket
