// A handler's view of its client's TCP connection: which descriptor it is and whether the client has
// hung up. The OpenAI server (http/server.cc) and the replicated front (front/front.cc) poll it while
// a non-streamed answer is being computed, to cancel work nobody will read.
//
// NOTE: cpp-httplib 0.11 (Debian 12) shows a handler neither its socket nor whether the client is
// still there (Request::is_connection_closed came in 0.14). The address 4-tuple names exactly one TCP
// connection, and its descriptor stays this connection's while the handler runs: httplib closes it
// only after the handler returns.
#pragma once

#include <string>

namespace rocket {

// The socket whose local and peer addresses are these (numeric hosts, as httplib's Request::local_addr
// and remote_addr write them); -1 when none is found.
int connection_socket(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);

// The client closed its end (or the connection broke). A request body has been read whole by now, so
// readable data is a pipelined next request, not a hang-up.
bool peer_closed(int fd);

}  // namespace rocket
