#include "front/replica.h"

// cpp-httplib's client for the health probe (the server side is http/server.cc's dependency).
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

extern char** environ;

namespace rocket {

namespace {

// A loopback port nothing listens on now. The child binds it a moment later; a port taken in between
// makes the child exit at upright, which the front reports.
int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail("front: cannot open a socket to find a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  if (!ok) fail("front: cannot find a free loopback port");
  return ntohs(a.sin_port);
}

// The GPU replica `index` runs on: the index-th entry of CUDA_VISIBLE_DEVICES when the front was given
// a list that long (the front's own share of the host), else the index itself.
std::string device_of(int index) {
  std::vector<std::string> visible;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::string s = v;
    for (size_t at = 0; at <= s.size();) {
      const size_t comma = std::min(s.find(',', at), s.size());
      if (comma > at) visible.push_back(s.substr(at, comma - at));
      at = comma + 1;
    }
  }
  return size_t(index) < visible.size() ? visible[size_t(index)] : std::to_string(index);
}

}  // namespace

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("signal {}", WTERMSIG(status));
  return fmt::format("status {}", status);
}

Replica::Replica(int index, std::string host, int port, pid_t pid)
    : index_(index), host_(std::move(host)), port_(port), pid_(pid) {}

Replica::Replica(int index, const std::string& url) : Replica(index, "", 0, -1) {
  static const std::regex kUrl(R"(http://([^/:]+):([0-9]{1,5})/?)");
  std::smatch m;
  if (!std::regex_match(url, m, kUrl) || std::stoi(m[2]) < 1 || std::stoi(m[2]) > 65535)
    fail("front: --replica {}: expected http://HOST:PORT", url);
  host_ = m[1];
  port_ = std::stoi(m[2]);
}

std::unique_ptr<Replica> Replica::spawn(int index, const std::filesystem::path& exe, const std::vector<std::string>& args) {
  const int port = free_loopback_port();
  std::vector<std::string> argv_s = {exe.string(), "launch", "--host", "127.0.0.1", "--port", std::to_string(port)};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  // Everything the child needs is built before fork(): after it only async-signal-safe calls run.
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e)
    if (std::string_view(*e).rfind("CUDA_VISIBLE_DEVICES=", 0) != 0) env_s.emplace_back(*e);
  env_s.push_back("CUDA_VISIBLE_DEVICES=" + device_of(index));
  std::vector<char*> argv, envp;
  for (auto& s : argv_s) argv.push_back(s.data());
  for (auto& s : env_s) envp.push_back(s.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) fail("front: cannot fork replica {}", index);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);  // the front died before the line above took effect
    // exec keeps the signal mask: clear it, so the replica sees SIGTERM whatever this thread blocked.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  std::fprintf(stderr, "[front] replica %d: pid %d on 127.0.0.1:%d, CUDA_VISIBLE_DEVICES=%s\n", index, int(pid), port,
               device_of(index).c_str());
  return std::unique_ptr<Replica>(new Replica(index, "127.0.0.1", port, pid));
}

std::string Replica::url() const { return fmt::format("http://{}:{}", host_, port_); }

bool Replica::reap_locked(int options) {
  if (pid_ < 0 || exit_status_) return exit_status_.has_value();
  int st = 0;
  if (waitpid(pid_, &st, options) != pid_) return false;
  exit_status_ = st;
  status_ = "exited (" + describe_wait_status(st) + ")";
  healthy_ = false;
  return true;
}

void Replica::probe(int timeout_ms, const Admit& admit) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reap_locked(WNOHANG) || !refusal_.empty()) return;
  }
  httplib::Client cli(host_, port_);
  const auto t = std::chrono::milliseconds(timeout_ms);
  cli.set_connection_timeout(t);
  cli.set_read_timeout(t);
  cli.set_write_timeout(t);
  std::string status = "unreachable";
  bool ok = false;
  if (auto res = cli.Get("/health")) {
    ok = res->status == 200;
    status = ok ? "ok" : fmt::format("http {}", res->status);
    try {
      const auto j = nlohmann::json::parse(res->body);
      if (j.contains("status") && j["status"].is_string()) status = j["status"].get<std::string>();
    } catch (const std::exception&) {
    }
  }
  bool admitted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    admitted = admitted_;
  }
  std::string refused;
  if (ok && !admitted) {
    // Admitted once: a replica's plan and booster do not change while it serves.
    if (auto res = cli.Get("/handshake"); res && res->status == 200)
      refused = admit(*this, res->body);
    else if (res)
      refused = fmt::format("no handshake (GET /handshake answered {}): an engine without one is of another build",
                            res->status);
    else
      ok = false, status = "unreachable";
    admitted = ok && refused.empty();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (reap_locked(WNOHANG)) return;
  if (!refused.empty()) {
    refusal_ = refused;
    status = "refused: " + refused;
    std::fprintf(stderr, "[front] replica %d (%s) refused: %s\n", index_, url().c_str(), refused.c_str());
  }
  admitted_ = admitted;
  ok = ok && admitted;
  if (ok != healthy_.load() && refused.empty())
    std::fprintf(stderr, "[front] replica %d: %s -> %s\n", index_, status_.c_str(), status.c_str());
  status_ = status;
  healthy_ = ok;
}

std::string Replica::refusal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refusal_;
}

void Replica::mark_down(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (healthy_.exchange(false)) std::fprintf(stderr, "[front] replica %d: out of rotation: %s\n", index_, why.c_str());
  if (!exit_status_) status_ = "unreachable";
}

std::string Replica::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

bool Replica::signal(int sig) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pid_ < 0 || reap_locked(WNOHANG)) return false;
  return ::kill(pid_, sig) == 0;
}

std::optional<int> Replica::wait_exit(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pid_ < 0) return std::nullopt;
      if (reap_locked(WNOHANG)) return exit_status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::optional<int> Replica::exit_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return exit_status_;
}

nlohmann::ordered_json Replica::describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::ordered_json j = {{"replica", index_}, {"url", url()}, {"status", status_}, {"healthy", healthy_.load()}};
  if (pid_ >= 0) j["pid"] = pid_;
  j["in_flight"] = in_flight.load();
  j["routed"] = routed.load();
  return j;
}

}  // namespace rocket
