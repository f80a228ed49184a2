// One replica behind the replicated front: a full engine serving the OpenAI API on its own port,
// either a process the front spawned (`rocket-engine launch` of the same engine, one per GPU) or
// one it was pointed at (--replica URL). The front keeps it in rotation while its /health answers
// ok, and counts what it routed to it.
//
// Thread safety: the atomics are read and written by any thread (HTTP threads route and count, the
// health thread probes); status() and the process fields are guarded by mu_.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rocket {

class Replica {
 public:
  // A replica already running at `url` ("http://HOST:PORT"); Error when the URL is not of that form.
  Replica(int index, const std::string& url);
  // Starts `exe launch --host 127.0.0.1 --port PORT ARGS...` as replica `index`, on a free port, with
  // CUDA_VISIBLE_DEVICES naming its one GPU: the index-th entry of the front's own
  // CUDA_VISIBLE_DEVICES when that lists enough, else the index. The child gets SIGTERM when the
  // front dies (PR_SET_PDEATHSIG), so a killed front leaves no replica serving unrouted.
  static std::unique_ptr<Replica> spawn(int index, const std::filesystem::path& exe, const std::vector<std::string>& args);
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  int index() const { return index_; }
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  std::string url() const;
  pid_t pid() const { return pid_; }  // -1 when the front did not spawn it

  // Decides a replica's admission from its GET /handshake body: "" admits it, anything else is why it
  // is refused (front/admission.h).
  using Admit = std::function<std::string(const Replica&, const std::string& handshake)>;
  // One health probe: GET /health within `timeout_ms`; a spawned child that has exited is reaped and
  // stays down. The first time /health is ok, GET /handshake and `admit` decide whether it may ever be
  // in rotation. Sets healthy() (ok and admitted) and status().
  void probe(int timeout_ms, const Admit& admit);
  // Refused at its handshake: never in rotation. The reason, "" while not refused.
  std::string refusal() const;
  // Out of rotation at once (a request could not be sent to it), until a probe finds it ok again.
  void mark_down(const std::string& why);
  bool healthy() const { return healthy_.load(); }
  // "ok", the replica's own /health status ("starting", "draining", "failed"), "unreachable",
  // "refused: ..." or "exited (...)".
  std::string status() const;
  // Spawned only: sends `sig` if the child is still running; false when it has exited.
  bool signal(int sig);
  // Spawned only: waits up to `timeout_ms` for the child to exit; its wait status, nullopt on timeout
  // or when it was reaped before (exit_status() then).
  std::optional<int> wait_exit(int timeout_ms);
  std::optional<int> exit_status() const;
  nlohmann::ordered_json describe() const;  // for the front's /health

  std::atomic<int64_t> in_flight{0};  // requests the front is proxying to it now
  std::atomic<int64_t> routed{0};     // requests routed to it
  std::atomic<int64_t> affinity{0};   // of those, routed for its cached prefix
  std::atomic<int64_t> failovers{0};  // requests that could not be sent to it and went elsewhere

 private:
  Replica(int index, std::string host, int port, pid_t pid);
  // Reaps the child if it has exited. REQUIRES: mu_ held.
  bool reap_locked(int options);

  const int index_;
  std::string host_;  // set once, by the constructors
  int port_;
  const pid_t pid_;
  std::atomic<bool> healthy_{false};
  mutable std::mutex mu_;
  std::string status_ = "starting";
  std::optional<int> exit_status_;
  bool admitted_ = false;
  std::string refusal_;
};

// Text for a wait status: "exit 0", "signal 9".
std::string describe_wait_status(int status);

}  // namespace rocket
