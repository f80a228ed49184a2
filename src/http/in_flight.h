// InFlight: counts one response from its handler's start until its last byte is written. A stream's
// chunked content provider outlives the handler and httplib ends a chunked response at stop(), so
// the handler makes one with std::make_shared and hands a copy of the pointer to the provider; a
// drain waits for the count to reach 0 before it stops the server (HttpServer::wait_responses, the
// front's drain). The front also counts a routed request against its replica's load with one.
//
// Thread safety: the counter is atomic; each InFlight is owned by one request.
#pragma once

#include <atomic>
#include <cstdint>

namespace rocket {

class InFlight {
 public:
  explicit InFlight(std::atomic<int64_t>& count) : count_(count) { ++count_; }
  ~InFlight() { --count_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int64_t>& count_;
};

}  // namespace rocket
