// GET /health follows the loop's state: 503 "starting" before launch, 200 "ok" while it serves, 503
// "draining" and 503 "failed" (with the engine's error) after, each 503 with Retry-After. The server
// is the real one on loopback; the loop is a stand-in reporting a chosen state.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "http/server.h"

namespace rocket {
namespace {

class StateLoop : public EngineLoop {
 public:
  const ModelInfo& model() const override { return model_; }
  Submitted submit(const CompletionRequest&, std::shared_ptr<RequestSink>) override {
    throw std::logic_error("the health test submits nothing");
  }
  nlohmann::ordered_json stats() const override { return nlohmann::ordered_json::object(); }
  PrefixReport report_prefix(const CompletionRequest&) override {
    throw std::logic_error("the health test asks for no prefix report");
  }
  LoopState state() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }
  void set(LoopState s) {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = std::move(s);
  }

 private:
  ModelInfo model_{"m", {}};
  mutable std::mutex mu_;
  LoopState state_;
};

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

struct Reply {
  int status = 0;
  bool retry_after = false;
  nlohmann::json body;
};

Reply get_health(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    throw std::runtime_error("cannot connect");
  }
  const std::string req = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (send(fd, req.data(), req.size(), 0) != ssize_t(req.size())) throw std::runtime_error("send");
  std::string raw;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) raw.append(buf, size_t(n));
  close(fd);
  Reply r;
  r.status = std::stoi(raw.substr(raw.find(' ') + 1, 3));
  const size_t head_end = raw.find("\r\n\r\n");
  const std::string head = raw.substr(0, head_end);
  r.retry_after = head.find("Retry-After:") != std::string::npos;
  r.body = nlohmann::json::parse(raw.substr(head_end + 4));
  return r;
}

TEST(ServerHealth, FollowsTheLoopsState) {
  ServerOptions o;
  o.port = free_port();
  o.http_threads = 2;
  HttpServer server(o);
  server.start();
  server.set_phase("fuel");
  Reply r = get_health(o.port);
  EXPECT_EQ(r.status, 503);
  EXPECT_TRUE(r.retry_after);
  EXPECT_EQ(r.body, (nlohmann::json{{"status", "starting"}, {"phase", "fuel"}}));

  StateLoop loop;
  server.launch(loop);
  r = get_health(o.port);
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.retry_after);
  EXPECT_EQ(r.body, (nlohmann::json{{"status", "ok"}, {"phase", "launch"}}));

  loop.set({LoopState::Status::kDraining, ""});
  r = get_health(o.port);
  EXPECT_EQ(r.status, 503);
  EXPECT_TRUE(r.retry_after);
  EXPECT_EQ(r.body, (nlohmann::json{{"status", "draining"}, {"phase", "launch"}}));

  loop.set({LoopState::Status::kFailed, "CUDA error: an illegal memory access was encountered"});
  r = get_health(o.port);
  EXPECT_EQ(r.status, 503);
  EXPECT_TRUE(r.retry_after);
  EXPECT_EQ(r.body, (nlohmann::json{{"status", "failed"},
                                    {"phase", "launch"},
                                    {"reason", "CUDA error: an illegal memory access was encountered"}}));
  server.stop();
  server.wait();
}

}  // namespace
}  // namespace rocket
