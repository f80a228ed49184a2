#include "front/front.h"

// cpp-httplib: the server the clients reach and the clients that reach the replicas, as in
// http/server.cc.
#include <httplib.h>

#include <semaphore.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_number.h"
#include "boosters/handshake.h"
#include "boosters/topology.h"
#include "front/admission.h"
#include "front/exposition.h"
#include "front/replica.h"
#include "front/route.h"
#include "http/bounded_server.h"
#include "http/connection.h"
#include "http/in_flight.h"
#include "http/server.h"
#include "http/sse.h"
#include "openai/protocol_error.h"
#include "plan/plan.h"

namespace rocket {

namespace {

using Json = nlohmann::ordered_json;
using namespace std::chrono_literals;

// Woken by SIGTERM / SIGINT (sem_post is async-signal-safe), as launch.cc does.
sem_t g_wake;
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_front_signal(int sig) {
  g_signal = sig;
  sem_post(&g_wake);
}

void send_error(httplib::Response& res, const ProtocolError& e) {
  res.status = e.status();
  if (e.status() == 503) res.set_header("Retry-After", "1");
  res.set_content(error_body(e).dump(), "application/json");
}

// What a replica must see of the client's request: its key (the replica checks it), its trace
// context and the body's type.
httplib::Headers upstream_headers(const httplib::Request& req) {
  httplib::Headers h;
  for (const char* name : {"Authorization", "x-api-key", "traceparent", "Content-Type"})
    if (req.has_header(name)) h.emplace(name, req.get_header_value(name));
  return h;
}

// One request relayed to a replica, on a thread of its own: the response's status and headers
// arrive first (the front answers with them), then its body in the chunks the replica wrote them in.
// When the client leaves, abandon() shuts the upstream connection down, and the replica cancels the
// generation as for any client that hangs up.
struct Relay {
  std::mutex mu;
  std::condition_variable cv;
  bool headers = false;   // the status line and headers came back
  bool finished = false;  // the exchange ended
  bool clean = false;     // ... with the whole body
  bool gone = false;      // the client left
  int status = 0;
  std::string content_type, retry_after, error;
  std::deque<std::string> chunks;
  // The upstream connection; stop() (thread-safe in httplib) shuts its socket down at once, so the
  // replica sees its client leave even while it sends nothing (a non-streamed answer being generated).
  std::shared_ptr<httplib::Client> client;

  // The client left: the upstream request ends now.
  void abandon() {
    {
      std::lock_guard<std::mutex> lock(mu);
      gone = true;
    }
    client->stop();
  }

  static std::shared_ptr<Relay> start(const Replica& to, const std::string& path, const httplib::Headers& headers,
                                      const std::string& body) {
    auto r = std::make_shared<Relay>();
    r->client = std::make_shared<httplib::Client>(to.host(), to.port());
    std::thread([r, path, headers, body] {
      httplib::Client& cli = *r->client;
      cli.set_connection_timeout(2s);
      cli.set_write_timeout(60s);
      // A non-streamed response arrives only once generated; a stream sends an event or a keep-alive
      // comment at least every second (http/server.cc).
      cli.set_read_timeout(std::chrono::hours(1));
      httplib::Request q;
      q.method = "POST";
      q.path = path;
      q.headers = headers;
      q.body = body;
      q.response_handler = [r](const httplib::Response& res) {
        std::lock_guard<std::mutex> lock(r->mu);
        r->status = res.status;
        r->content_type = res.get_header_value("Content-Type");
        r->retry_after = res.get_header_value("Retry-After");
        r->headers = true;
        r->cv.notify_all();
        return !r->gone;
      };
      q.content_receiver = [r](const char* data, size_t n, uint64_t, uint64_t) {
        std::lock_guard<std::mutex> lock(r->mu);
        if (r->gone) return false;
        r->chunks.emplace_back(data, n);
        r->cv.notify_all();
        return true;
      };
      httplib::Response res;
      httplib::Error err = httplib::Error::Success;
      const bool ok = cli.send(q, res, err);
      std::lock_guard<std::mutex> lock(r->mu);
      r->finished = true;
      r->clean = ok;
      if (!ok) r->error = httplib::to_string(err);
      r->cv.notify_all();
    }).detach();
    return r;
  }
};

// The front's own series, appended to the merged exposition.
std::string front_series(const std::vector<std::unique_ptr<Replica>>& replicas, int64_t unrouted) {
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const auto& r : replicas) out += fmt::format("{}{{replica=\"{}\"}} {}\n", name, r->index(), value(*r));
  };
  family("rocket_front_routed_total", "counter", "Requests the front sent to each replica.",
         [](const Replica& r) { return r.routed.load(); });
  family("rocket_front_affinity_total", "counter",
         "Requests sent to a replica because its prefix cache held part of the prompt.",
         [](const Replica& r) { return r.affinity.load(); });
  family("rocket_front_failovers_total", "counter",
         "Requests that could not be sent to a replica and were retried on another.",
         [](const Replica& r) { return r.failovers.load(); });
  family("rocket_front_replica_up", "gauge", "1 while the replica is in rotation.",
         [](const Replica& r) { return r.healthy() ? 1 : 0; });
  out += fmt::format("# HELP rocket_front_unrouted_total Requests answered 503 because no replica was in rotation.\n"
                     "# TYPE rocket_front_unrouted_total counter\nrocket_front_unrouted_total {}\n",
                     unrouted);
  return out;
}

class Front {
 public:
  Front(const FrontOptions& o, std::vector<std::unique_ptr<Replica>> replicas, Admission& admission)
      : options_(o), replicas_(std::move(replicas)), admission_(admission) {
    server_.new_task_queue = [n = o.http_threads] { return new httplib::ThreadPool(n); };
    server_.set_payload_max_length(o.max_body_bytes);
    server_.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& s) {
      completion(q, s, "/v1/chat/completions");
    });
    server_.Post("/v1/completions",
                 [this](const httplib::Request& q, httplib::Response& s) { completion(q, s, "/v1/completions"); });
    server_.Post("/v1/responses",
                 [this](const httplib::Request& q, httplib::Response& s) { completion(q, s, "/v1/responses"); });
    server_.Post("/v1/messages",
                 [this](const httplib::Request& q, httplib::Response& s) { completion(q, s, "/v1/messages"); });
    // No prefix to route by: a replica's prefix report refuses it (404), and the least loaded counts.
    server_.Post("/v1/messages/count_tokens", [this](const httplib::Request& q, httplib::Response& s) {
      completion(q, s, "/v1/messages/count_tokens");
    });
    server_.Get("/v1/models", [this](const httplib::Request& q, httplib::Response& s) { models(q, s); });
    server_.Get("/v1/models/(.+)", [this](const httplib::Request& q, httplib::Response& s) { models(q, s); });
    server_.Get("/health", [this](const httplib::Request&, httplib::Response& s) { health(s); });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& s) { metrics(s); });
    server_.Get("/stats", [this](const httplib::Request&, httplib::Response& s) { stats(s); });
  }

  ~Front() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (health_thread_.joinable()) health_thread_.join();
    stop_server();
    if (server_thread_.joinable()) server_thread_.join();
  }

  void listen() {
    if (!server_.bind(options_.host, options_.port))
      fail("front: cannot listen on {}:{}", options_.host, options_.port);
    std::fprintf(stderr, "[front] listening on http://%s:%d for %zu replicas\n", options_.host.c_str(), options_.port,
                 replicas_.size());
    server_thread_ = std::thread([this] {
      server_.listen_after_bind();
      listen_over_ = true;
    });
    health_thread_ = std::thread([this] { probe_loop(); });
  }

  // Blocks until every replica has been probed ok, one the front spawned exited, a signal came, or
  // the startup timeout passed. True when the front may serve.
  bool wait_launched() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.startup_timeout);
    for (;;) {
      if (g_signal) return false;
      bool all = true;
      for (const auto& r : replicas_) {
        if (const std::string why = r->refusal(); !why.empty()) {
          std::fprintf(stderr, "[front] replica %d (%s) %s: the front does not launch\n", r->index(), r->url().c_str(),
                       why.c_str());
          return false;
        }
        if (r->exit_status()) {
          std::fprintf(stderr, "[front] replica %d %s during its countdown: the front does not launch\n", r->index(),
                       r->status().c_str());
          return false;
        }
        all = all && r->healthy();
      }
      if (all) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        std::fprintf(stderr, "[front] replicas not launched after %g s\n", options_.startup_timeout);
        if (replicas_.front()->pid() >= 0) return false;
        break;  // replicas it does not own: serve with those that are up, as failover does
      }
      std::this_thread::sleep_for(50ms);
    }
    launched_ = true;
    std::fprintf(stderr, "[front] launch: routing over %zu replicas\n", replicas_.size());
    return true;
  }

  // SIGTERM: routing stops, spawned replicas drain, the last responses are written. The exit status.
  int drain() {
    draining_ = true;
    const bool spawned = replicas_.front()->pid() >= 0;
    std::fprintf(stderr, "[front] draining: %s\n", spawned ? "SIGTERM to the replicas" : "waiting for the responses in flight");
    bool clean = true;
    std::vector<bool> alive;
    for (const auto& r : replicas_) alive.push_back(r->signal(SIGTERM));
    // The replicas cut their own requests off at --drain-timeout; a few seconds more let them write
    // the last events and exit.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.drain_timeout) + 10s;
    for (size_t i = 0; i < replicas_.size(); ++i) {
      Replica& r = *replicas_[i];
      if (!spawned) break;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      const std::optional<int> st = alive[i] ? r.wait_exit(int(std::max<int64_t>(left.count(), 0))) : r.exit_status();
      if (!st) {
        std::fprintf(stderr, "[front] replica %d did not exit after its drain: SIGKILL\n", r.index());
        r.signal(SIGKILL);
        r.wait_exit(5000);
        clean = false;
      } else if (alive[i] && *st != 0) {
        std::fprintf(stderr, "[front] replica %d drained with %s\n", r.index(), describe_wait_status(*st).c_str());
        clean = false;
      }
    }
    const auto until = spawned ? std::chrono::steady_clock::now() + 5s
                               : std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.drain_timeout);
    while (responses_.load() > 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
    if (responses_.load() > 0) {
      std::fprintf(stderr, "[front] %lld responses still being relayed at the end of the drain; closing them\n",
                   (long long)responses_.load());
    }
    stop_server();
    std::fprintf(stderr, "[front] drained; exiting %d\n", clean ? 0 : 1);
    return clean ? 0 : 1;
  }

  // A front that does not launch leaves no replica behind.
  void stop_replicas() {
    for (const auto& r : replicas_) r->signal(SIGTERM);
    for (const auto& r : replicas_)
      if (r->pid() >= 0 && !r->wait_exit(10000)) r->signal(SIGKILL), r->wait_exit(5000);
  }

 private:
  // httplib ignores stop() until its listen loop has begun: wait for it to run (or to be over).
  // Once: a second stop() while the listen loop is still winding down would close no socket.
  void stop_server() {
    if (!server_thread_.joinable() || server_stopped_.exchange(true)) return;
    while (!listen_over_ && !server_.is_running()) std::this_thread::sleep_for(1ms);
    server_.stop();
  }

  void probe_loop() {
    const auto interval = std::chrono::duration<double>(options_.health_interval);
    for (;;) {
      for (const auto& r : replicas_) r->probe(1000, admit_);
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, interval, [&] { return stopping_; })) return;
    }
  }

  // Every replica in rotation, asked in parallel what it holds of this request's prompt and how busy
  // it is. One that cannot be reached leaves rotation now; one that refuses the request (a 4xx: bad
  // request, bad key) stays a candidate holding nothing, so the replica's own answer reaches the client.
  std::vector<ReplicaReport> gather_reports(const std::string& path, const httplib::Headers& headers,
                                            const std::string& body) {
    std::vector<ReplicaReport> reports(replicas_.size());
    std::vector<std::thread> asks;
    for (size_t i = 0; i < replicas_.size(); ++i) {
      Replica* rp = replicas_[i].get();
      if (!rp->healthy()) continue;
      asks.emplace_back([&reports, &headers, &body, &path, rp, i] {
        Replica& r = *rp;
        ReplicaReport& rep = reports[i];
        rep.healthy = true;
        rep.load = r.in_flight.load();
        httplib::Client cli(r.host(), r.port());
        cli.set_connection_timeout(1s);
        cli.set_read_timeout(10s);  // the replica answers between two steps of its loop
        // The client's own Content-Type is among `headers`: none added.
        auto res = cli.Post(("/prefix" + path).c_str(), headers, body, "");
        if (!res) {
          r.mark_down(fmt::format("prefix report: {}", httplib::to_string(res.error())));
          rep.healthy = false;
          return;
        }
        if (res->status == 503) {  // draining or failed: it would refuse the request too
          rep.healthy = false;
          return;
        }
        if (res->status != 200) return;
        try {
          const auto j = nlohmann::json::parse(res->body);
          rep.cached_tokens = number(j.at("cached_tokens"));
          const int64_t running = number(j.at("running")), waiting = number(j.at("waiting"));
          rep.load = std::max(rep.load, running + waiting);
        } catch (const std::exception&) {
        }
      });
    }
    for (auto& t : asks) t.join();
    return reports;
  }

  void completion(const httplib::Request& req, httplib::Response& res, const std::string& path) {
    auto in_flight = std::make_shared<InFlight>(responses_);
    try {
      if (draining_)
        throw ProtocolError(503, "the front is shutting down and accepts no new requests", "", "server_error",
                            "shutting_down");
      if (!launched_)
        throw ProtocolError(503, "the replicas are not launched yet; retry later", "", "server_error", "not_launched");
      const httplib::Headers headers = upstream_headers(req);
      std::vector<ReplicaReport> reports = gather_reports(path, headers, req.body);
      const std::string key = routing_key(path, req.body);
      if (const std::optional<size_t> last = keyed(key)) reports[*last].keyed = true;
      const int fd = BoundedServer::current_socket();
      for (;;) {
        const std::optional<size_t> pick = choose_replica(reports, rotate_.fetch_add(1));
        if (!pick) break;
        Replica& r = *replicas_[*pick];
        reports[*pick].healthy = false;  // tried once per request
        auto routed = std::make_shared<InFlight>(r.in_flight);
        std::shared_ptr<Relay> relay = Relay::start(r, path, headers, req.body);
        std::unique_lock<std::mutex> lock(relay->mu);
        // A non-streamed answer's headers come only with its body: a client that hangs up meanwhile is
        // seen by polling its socket every 200 ms, as the replica's own server does.
        while (!relay->cv.wait_for(lock, 200ms, [&] { return relay->headers || relay->finished; })) {
          if (fd < 0 || !peer_closed(fd)) continue;
          lock.unlock();
          relay->abandon();
          std::fprintf(stderr, "[front] the client hung up before the response; its request was cancelled upstream\n");
          return;
        }
        if (!relay->headers) {
          // Nothing came back, so nothing reached the client: another replica may run it.
          ++r.failovers;
          r.mark_down(fmt::format("request: {}", relay->error));
          std::fprintf(stderr, "[front] replica %d: request not answered (%s); retrying elsewhere\n", r.index(),
                       relay->error.c_str());
          continue;
        }
        ++r.routed;
        if (reports[*pick].cached_tokens > 0) ++r.affinity;
        remember(key, *pick);
        lock.unlock();
        respond(res, relay, routed, in_flight);
        return;
      }
      ++unrouted_;
      throw ProtocolError(503, "no replica is in rotation (every one is down or draining); retry later", "",
                          "server_error", "no_replica");
    } catch (const ProtocolError& e) {
      send_error(res, e);
    }
  }

  // The replica a routing key (route.h) last went to, if any.
  std::optional<size_t> keyed(const std::string& key) {
    if (key.empty()) return std::nullopt;
    std::lock_guard<std::mutex> lock(keys_mu_);
    const auto it = keys_.find(key);
    return it == keys_.end() ? std::nullopt : std::optional<size_t>(it->second);
  }
  void remember(const std::string& key, size_t replica) {
    if (key.empty()) return;
    std::lock_guard<std::mutex> lock(keys_mu_);
    if (keys_.size() >= kMaxKeys && !keys_.contains(key)) keys_.clear();  // bounded: old sessions start afresh
    keys_[key] = replica;
  }

  // The replica's answer as the client's: its status and body; a stream chunk by chunk.
  static void respond(httplib::Response& res, std::shared_ptr<Relay> relay, std::shared_ptr<InFlight> routed,
                      std::shared_ptr<InFlight> in_flight) {
    std::unique_lock<std::mutex> lock(relay->mu);
    res.status = relay->status;
    if (!relay->retry_after.empty()) res.set_header("Retry-After", relay->retry_after);
    if (relay->content_type.rfind("text/event-stream", 0) != 0) {
      relay->cv.wait(lock, [&] { return relay->finished; });  // the body follows its headers at once
      if (!relay->clean) {
        send_error(res, ProtocolError(502, fmt::format("the replica failed while answering: {}", relay->error), "",
                                      "server_error"));
        return;
      }
      std::string body;
      for (const std::string& c : relay->chunks) body += c;
      res.set_content(body, relay->content_type.empty() ? "application/json" : relay->content_type);
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        relay->content_type,
        [relay, routed, in_flight](size_t, httplib::DataSink& out) -> bool {
          std::unique_lock<std::mutex> lock(relay->mu);
          relay->cv.wait_for(lock, 200ms, [&] { return !relay->chunks.empty() || relay->finished; });
          if (!relay->chunks.empty()) {
            const std::string chunk = std::move(relay->chunks.front());
            relay->chunks.pop_front();
            lock.unlock();
            if (out.write(chunk.data(), chunk.size())) return true;
            relay->abandon();
            return false;
          }
          if (relay->finished) {
            if (!relay->clean) {
              // The replica died mid-stream: what was sent stands, and the stream ends as the
              // replica's own errors end it.
              const std::string e = sse_data(error_body(ProtocolError(
                  502, fmt::format("the replica serving this stream failed: {}", relay->error), "", "server_error")));
              out.write(e.data(), e.size());
              out.write(kSseDone.data(), kSseDone.size());
            }
            out.done();
            return true;
          }
          lock.unlock();
          if (out.is_writable()) return true;
          relay->abandon();
          return false;
        },
        [relay](bool done) {
          if (!done) relay->abandon();
        });
  }

  // GET /v1/models and /v1/models/{id}, as the first replica in rotation answers them.
  void models(const httplib::Request& req, httplib::Response& res) {
    for (const auto& r : replicas_) {
      if (!r->healthy()) continue;
      httplib::Client cli(r->host(), r->port());
      cli.set_connection_timeout(1s);
      cli.set_read_timeout(5s);
      if (auto up = cli.Get(req.path, upstream_headers(req))) {
        res.status = up->status;
        res.set_content(up->body, up->get_header_value("Content-Type"));
        return;
      }
      r->mark_down(req.path + " unanswered");
    }
    send_error(res, ProtocolError(503, "no replica is in rotation; retry later", "", "server_error", "no_replica"));
  }

  void health(httplib::Response& res) {
    Json list = Json::array();
    int up = 0;
    for (const auto& r : replicas_) {
      up += r->healthy();
      list.push_back(r->describe());
    }
    const char* status = draining_ ? "draining" : !launched_ ? "starting" : up > 0 ? "ok" : "down";
    const bool ok = std::string_view(status) == "ok";
    res.status = ok ? 200 : 503;
    if (!ok) res.set_header("Retry-After", "1");
    const Json out = {{"status", status}, {"replicas_up", up}, {"replicas", std::move(list)}};
    res.set_content(out.dump(), "application/json");
  }

  // A replica's GET endpoint, or "" when it does not answer 200 in a second.
  static std::string scrape(const Replica& r, const char* path) {
    httplib::Client cli(r.host(), r.port());
    cli.set_connection_timeout(1s);
    cli.set_read_timeout(1s);
    auto res = cli.Get(path);
    return res && res->status == 200 ? res->body : std::string();
  }

  void metrics(httplib::Response& res) {
    std::vector<std::string> texts;
    for (const auto& r : replicas_) texts.push_back(r->healthy() ? scrape(*r, "/metrics") : std::string());
    res.set_content(merge_expositions(texts) + front_series(replicas_, unrouted_.load()),
                    "text/plain; version=0.0.4; charset=utf-8");
  }

  void stats(httplib::Response& res) {
    Json list = Json::array();
    for (const auto& r : replicas_) {
      Json j = r->describe();
      j["affinity"] = r->affinity.load();
      j["failovers"] = r->failovers.load();
      const std::string body = r->healthy() ? scrape(*r, "/stats") : std::string();
      j["stats"] = body.empty() ? Json() : Json::parse(body, nullptr, false);
      list.push_back(std::move(j));
    }
    res.set_content(Json{{"unrouted", unrouted_.load()}, {"replicas", std::move(list)}}.dump(), "application/json");
  }

  FrontOptions options_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  Admission& admission_;
  const Replica::Admit admit_ = [this](const Replica& r, const std::string& body) {
    try {
      return admission_.admit(r.index(), Handshake::from_json(nlohmann::json::parse(body)));
    } catch (const std::exception& e) {
      return fmt::format("unreadable handshake: {}", e.what());
    }
  };
  BoundedServer server_;
  std::thread server_thread_, health_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<bool> launched_{false}, draining_{false}, listen_over_{false}, server_stopped_{false};
  std::atomic<size_t> rotate_{0};
  std::atomic<int64_t> responses_{0}, unrouted_{0};
  // Routing key -> the replica it last went to (at most kMaxKeys sessions remembered).
  static constexpr size_t kMaxKeys = 65536;
  std::mutex keys_mu_;
  std::unordered_map<std::string, size_t> keys_;
};

}  // namespace

int run_front(const std::filesystem::path& engine_exe, const FrontOptions& o, Admission& admission) {
  ::signal(SIGPIPE, SIG_IGN);  // a client or replica that hangs up is a failed write, not a signal
  sem_init(&g_wake, 0, 0);
  struct sigaction stop {};
  stop.sa_handler = on_front_signal;
  sigemptyset(&stop.sa_mask);
  ::sigaction(SIGTERM, &stop, nullptr);
  ::sigaction(SIGINT, &stop, nullptr);

  std::vector<std::unique_ptr<Replica>> replicas;
  for (int i = 0; i < o.replicas; ++i) replicas.push_back(Replica::spawn(i, engine_exe, o.replica_args));
  for (size_t i = 0; i < o.replica_urls.size(); ++i) replicas.push_back(std::make_unique<Replica>(int(i), o.replica_urls[i]));
  Front front(o, std::move(replicas), admission);
  try {
    front.listen();
  } catch (const Error&) {
    front.stop_replicas();
    throw;
  }
  if (!front.wait_launched()) {
    front.stop_replicas();
    return 1;
  }
  while (sem_wait(&g_wake) != 0 && errno == EINTR) {
  }
  // A second signal ends the process at once, as for launch.
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGINT, SIG_DFL);
  return front.drain();
}

int front_main(const std::filesystem::path& engine_exe, const std::vector<std::string>& args) {
  const std::filesystem::path dir = engine_exe.parent_path().parent_path();
  const Plan plan = Plan::load((dir / "plan.json").string());
  FrontOptions o;
  CLI::App cli("The replicated arrangement's HTTP front: routes each request to the replica whose prefix cache holds\n"
               "the longest prefix of its prompt, else to the least loaded; fails over when one dies.",
               "rocket-engine front");
  add_front_options(cli, o);
  if (const auto rc = parse_front_command(cli, o, args, plan.boosters.count)) return *rc;
  const int replicas = o.replicas > 0 ? o.replicas : int(o.replica_urls.size());
  Topology machine;  // spawned replicas run on this machine's GPUs; given ones wherever they are
  machine.kind = plan.booster;
  if (o.replicas > 0) machine = visible_topology(plan.booster);
  if (const std::string m = front_mismatch(plan, replicas, o.replicas > 0 ? &machine : nullptr); !m.empty())
    fail("front: {}", m);
  if (!o.max_body_bytes) o.max_body_bytes = default_max_body_bytes(plan.max_context);
  if (o.replicas > 0) {
    o.replica_args.push_back("--drain-timeout");
    o.replica_args.push_back(fmt::format("{}", o.drain_timeout));
  }
  Admission admission(handshake_of(plan, dir, machine), plan.boosters.device_name, dir.string());
  return run_front(engine_exe, o, admission);
}

}  // namespace rocket
