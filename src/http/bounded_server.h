// An httplib::Server whose connections read a bounded request head, and refuse what httplib 0.11
// (Debian 12) would otherwise take without bound:
//  - headers: it caps each line at 8 KiB but not their number, so one client streaming short header
//    lines grows the server by ~100 bytes a line until memory runs out (3M lines: +300 MiB). Here the
//    head (request line and headers) is at most `head_bytes` (431) and must arrive within
//    `head_seconds` of its first byte (408), and the body within `head_seconds` more plus a second per
//    `body_bytes_per_second` of it (408): httplib's only bound is 5 s between two reads, so a client
//    sending a byte every 4 s held one of its threads for days;
//  - bodies: over the payload limit it reads and drops the whole body before answering 413 (as long as
//    the client sends), reads "Content-Length: -5" as a huge length, and, built with zlib and brotli,
//    inflates a Content-Encoding body with no limit past the length it checked (a 0.5 MB gzip body of
//    zeros became 500 MiB in memory). Here a complete head is checked before any of its body is read:
//    a Content-Length over the limit is a 413, one that is not a decimal (or two that differ) a 400, a
//    Content-Encoding other than identity a 415, and the connection closes.
// Its own refusals (these, 413 over the payload limit, 400 for a malformed request line) get a body
// in OpenAI's error shape.
//
// The hook is httplib's: process_and_close_socket (virtual) runs each connection, process_request
// (protected) each request over a Stream of ours, as its SSLServer does. This connection loop also
// keeps a pipelined request's bytes between requests, and shows a handler its socket
// (current_socket), which httplib 0.11 does not.
#pragma once

#include <httplib.h>

#include <cstddef>

namespace rocket {

struct HeadLimits {
  size_t head_bytes = 64 << 10;
  int head_seconds = 30;
  size_t body_bytes_per_second = 64 << 10;  // the slowest average a body may arrive at, past head_seconds
};

class BoundedServer : public httplib::Server {
 public:
  explicit BoundedServer(HeadLimits limits = {});

  // The socket of the connection whose request the calling thread is handling; -1 outside a handler.
  static int current_socket();

  // bind_to_port, then a listen backlog of the system's maximum. NOTE: cpp-httplib listens with a
  // backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed when Debian built it): a burst of clients
  // connecting at once overflowed it and the kernel reset some of them (200 at once: 31 reset).
  bool bind(const std::string& host, int port);

 private:
  bool process_and_close_socket(socket_t sock) override;

  HeadLimits limits_;
};

}  // namespace rocket
