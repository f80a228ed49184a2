#include "http/bounded_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <string>

#include <fmt/format.h>

#include "http/connection.h"
#include "http/request_head.h"
#include "openai/protocol_error.h"

namespace rocket {

namespace {

using Clock = std::chrono::steady_clock;

thread_local int t_socket = -1;

// Why the request this thread reads had its head refused (status 0: it was not); the error handler,
// which runs on the same thread, writes it.
thread_local HeadVerdict t_refusal;

// One connection: its socket and what was received but not yet read (a pipelined next request).
struct Connection {
  int sock;
  std::array<char, 16384> buf;
  size_t off = 0, len = 0;
  bool buffered() const { return off < len; }
};

int poll_one(int sock, short events, int timeout_ms) {
  pollfd p{sock, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r >= 0 || errno != EINTR) return r;
  }
}

// Rounded up: a poll that waits this long ends at or past the deadline, not a fraction before it.
int remaining_ms(Clock::time_point deadline) {
  return int(std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count()));
}

// The numeric address of one end of a socket (getpeername or getsockname); ip empty and port -1 when
// there is none.
using SocketName = int (*)(int, sockaddr*, socklen_t*);
void numeric_address(SocketName name, int sock, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  char host[NI_MAXHOST];
  ip.clear();
  port = -1;
  if (name(sock, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
    return;
  ip = host;
  port = a.ss_family == AF_INET    ? ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port)
         : a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port)
                                   : -1;
}

// One request's reads and its response's writes. Until the blank line that ends the head, bytes are
// handed out up to that line only and counted against the limits; the body is read as it comes (httplib
// checks its length against the payload limit).
class RequestStream final : public httplib::Stream {
 public:
  RequestStream(Connection& c, const HeadLimits& limits, size_t max_body_bytes, int read_timeout_ms, int write_timeout_ms)
      : c_(c), limits_(limits), max_body_bytes_(max_body_bytes), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms),
        head_deadline_(Clock::now() + std::chrono::seconds(limits.head_seconds)) {}

  bool refused() const { return refused_; }

  bool is_readable() const override { return c_.buffered() || poll_one(c_.sock, POLLIN, read_timeout_ms_) > 0; }

  bool is_writable() const override {
    return poll_one(c_.sock, POLLOUT, write_timeout_ms_) > 0 && !peer_closed(c_.sock);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (refused_ || size == 0) return refused_ ? -1 : 0;
    if (!c_.buffered() && !fill()) return -1;
    if (!in_head_) {
      const size_t n = std::min(size, c_.len - c_.off);
      std::copy_n(c_.buf.data() + c_.off, n, ptr);
      c_.off += n;
      return ssize_t(n);
    }
    size_t n = 0;
    while (n < size && c_.buffered()) {
      const char ch = c_.buf[c_.off];
      head_.push_back(ch);
      if (head_.size() > limits_.head_bytes)
        return refuse(431, fmt::format("The request line and headers exceed this server's limit of {} bytes.", limits_.head_bytes),
                      "request_header_fields_too_large");
      if (head_.ends_with("\r\n\r\n")) {  // httplib ends a head only there too
        in_head_ = false;
        HeadVerdict why = check_request_head(head_, max_body_bytes_);
        if (why.status) return refuse(why.status, std::move(why.message), std::move(why.code));
        // A chunked body (no length) may be as large as the limit.
        const size_t body = why.body_bytes >= 0 ? size_t(why.body_bytes) : max_body_bytes_;
        body_deadline_ = Clock::now() + std::chrono::seconds(limits_.head_seconds) +
                         std::chrono::seconds(body / std::max<size_t>(limits_.body_bytes_per_second, 1));
      }
      ptr[n++] = ch;
      ++c_.off;
      if (!in_head_) break;
    }
    return ssize_t(n);
  }

  // Something of a response was written (httplib writes none when the request line itself fails).
  bool wrote() const { return wrote_; }

  ssize_t write(const char* ptr, size_t size) override {
    wrote_ = true;
    if (!is_writable()) return -1;
    for (;;) {
      const ssize_t n = ::send(c_.sock, ptr, size, MSG_NOSIGNAL);
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { numeric_address(getpeername, c_.sock, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { numeric_address(getsockname, c_.sock, ip, port); }

  socket_t socket() const override { return c_.sock; }

 private:
  // Receives more bytes: within the read timeout, and while in the head within its deadline too.
  bool fill() {
    const Clock::time_point deadline = in_head_ ? head_deadline_ : body_deadline_;
    if (poll_one(c_.sock, POLLIN, std::min(read_timeout_ms_, remaining_ms(deadline))) <= 0) {
      if (Clock::now() >= deadline)
        refuse(408, in_head_ ? fmt::format("The request line and headers did not arrive within {} s.", limits_.head_seconds)
                             : fmt::format("The request body did not arrive in time (at least {} KiB/s after its first {} s).",
                                           limits_.body_bytes_per_second >> 10, limits_.head_seconds),
               "request_timeout");
      return false;
    }
    ssize_t n;
    do n = ::recv(c_.sock, c_.buf.data(), c_.buf.size(), 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0) return false;
    c_.off = 0, c_.len = size_t(n);
    return true;
  }

  ssize_t refuse(int status, std::string message, std::string code) {
    refused_ = true;
    t_refusal = {status, std::move(message), std::move(code)};
    return -1;
  }

  Connection& c_;
  const HeadLimits& limits_;
  size_t max_body_bytes_;
  int read_timeout_ms_, write_timeout_ms_;
  Clock::time_point head_deadline_, body_deadline_;
  bool in_head_ = true, refused_ = false, wrote_ = false;
  std::string head_;
};

// Waits for the first byte of the connection's next request: false when the client closed, the
// keep-alive timeout passed, or the server stopped (it closes its listening socket).
bool await_request(const Connection& c, int keep_alive_seconds, const std::atomic<socket_t>& listening) {
  if (c.buffered()) return true;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(keep_alive_seconds);
  while (listening != INVALID_SOCKET) {
    const int left = remaining_ms(deadline);
    const int r = poll_one(c.sock, POLLIN, std::min(left, 100));
    if (r != 0) return r > 0;
    if (left == 0) return false;
  }
  return false;
}

ProtocolError refusal_error(const HeadVerdict& why) {
  return ProtocolError(why.status, why.message, "", "invalid_request_error", why.code);
}

// The refusal's answer, written here when httplib wrote none (a request line cut short by the head's
// limits ends its request without an answer).
void write_refusal(int sock, const HeadVerdict& why) {
  const char* reason = why.status == 408 ? "Request Timeout" : why.status == 431 ? "Request Header Fields Too Large" : "Bad Request";
  const std::string body = error_body(refusal_error(why)).dump();
  const std::string out = fmt::format("HTTP/1.1 {} {}\r\nConnection: close\r\nContent-Type: application/json\r\n"
                                      "Content-Length: {}\r\n\r\n{}",
                                      why.status, reason, body.size(), body);
  for (size_t at = 0; at < out.size();) {
    if (poll_one(sock, POLLOUT, 1000) <= 0) return;
    const ssize_t n = ::send(sock, out.data() + at, out.size() - at, MSG_NOSIGNAL);
    if (n <= 0 && errno != EINTR) return;
    at += size_t(std::max<ssize_t>(n, 0));
  }
}

// After a refusal the client may still be sending the body or headers it was refused for; closing
// with them unread would reset the connection, and a client that writes its whole request before it
// reads (most do) would see the reset instead of the answer. So, as nginx's lingering close: the answer
// is followed by a FIN, and what still comes is read and dropped, for at most 2 s and 64 MiB.
void linger(int sock) {
  ::shutdown(sock, SHUT_WR);
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(2);
  std::array<char, 65536> scratch;
  for (size_t dropped = 0; dropped < (size_t(64) << 20);) {
    if (poll_one(sock, POLLIN, remaining_ms(deadline)) <= 0) return;
    const ssize_t n = ::recv(sock, scratch.data(), scratch.size(), 0);
    if (n <= 0 && errno != EINTR) return;
    dropped += size_t(std::max<ssize_t>(n, 0));
  }
}

}  // namespace

BoundedServer::BoundedServer(HeadLimits limits) : limits_(limits) {
  set_error_handler(HandlerWithResponse([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return HandlerResponse::Unhandled;  // a handler's own answer
    ProtocolError e(res.status, fmt::format("HTTP {}: the server could not handle this request.", res.status), "",
                    res.status >= 500 ? "server_error" : "invalid_request_error");
    if (t_refusal.status) {
      res.status = t_refusal.status;
      res.set_header("Connection", "close");  // its body, if any, is not read
      e = refusal_error(t_refusal);
    } else if (res.status == 413) {
      e = refusal_error(body_too_large(payload_max_length_));
    }
    res.set_content(error_body(e).dump(), "application/json");
    return HandlerResponse::Handled;
  }));
}

int BoundedServer::current_socket() { return t_socket; }

bool BoundedServer::bind(const std::string& host, int port) {
  if (!bind_to_port(host, port)) return false;
  // listen() again on a listening socket only changes its backlog.
  return ::listen(svr_sock_, SOMAXCONN) == 0;
}

bool BoundedServer::process_and_close_socket(socket_t sock) {
  Connection c{sock, {}};
  t_socket = sock;
  bool ret = false;
  const int read_ms = int(read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000);
  const int write_ms = int(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000);
  for (size_t left = keep_alive_max_count_; left > 0 && await_request(c, int(keep_alive_timeout_sec_), svr_sock_); --left) {
    t_refusal = {};
    RequestStream strm(c, limits_, payload_max_length_, read_ms, write_ms);
    bool closed = false;
    ret = process_request(strm, /*close_connection=*/left == 1 || strm.refused(), closed, nullptr);
    if (strm.refused() && !strm.wrote()) write_refusal(sock, t_refusal);
    if (!ret || closed || strm.refused()) break;  // a refused head leaves its body unread: close
  }
  t_socket = -1;
  if (t_refusal.status) linger(sock);
  t_refusal = {};
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace rocket
