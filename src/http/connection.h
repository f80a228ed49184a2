// Whether a handler's client is still there. The OpenAI server (http/server.cc) and the replicated
// front (front/front.cc) poll it while a non-streamed answer is being computed, to cancel work nobody
// will read; the handler's socket is BoundedServer::current_socket() (http/bounded_server.h).
#pragma once

namespace rocket {

// The client closed its end (or the connection broke). A request body has been read whole by now, so
// readable data is a pipelined next request, not a hang-up.
bool peer_closed(int fd);

}  // namespace rocket
