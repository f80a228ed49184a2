#include "serve/server.h"

// cpp-httplib: one small dependency in Debian (libcpp-httplib-dev; header-only upstream, a header + .so
// there), thread-per-connection with chunked content providers that make SSE a loop over a blocking
// queue, and no TLS needed on loopback. Boost.Beast would mean Asio and far more code for the same.
#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "serve/output_parser.h"
#include "serve/protocol_error.h"
#include "serve/random_id.h"
#include "serve/sse.h"

namespace fs = std::filesystem;

namespace rocket {

using Json = nlohmann::ordered_json;

// ---- FifoEngineLoop ----

namespace {

Json read_json_file(const fs::path& p) {
  std::ifstream f(p);
  if (!f) fail("{}: cannot read", p.string());
  Json j = Json::parse(f, nullptr, false);
  if (j.is_discarded()) fail("{}: not JSON", p.string());
  return j;
}

// A special token's text from tokenizer_config.json: a string or {"content": ...}.
std::string token_string(const Json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const Json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

Json messages_json(const std::vector<ChatMessage>& messages) {
  Json out = Json::array();
  for (const ChatMessage& m : messages) {
    Json j = Json::object();
    j["role"] = m.role;
    if (m.content) j["content"] = *m.content;
    else j["content"] = nullptr;
    if (!m.name.empty()) j["name"] = m.name;
    if (!m.reasoning_content.empty()) j["reasoning_content"] = m.reasoning_content;
    if (!m.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ToolCall& c : m.tool_calls)
        calls.push_back(Json{{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      j["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
    out.push_back(std::move(j));
  }
  return out;
}

Json tools_json(const std::vector<Tool>& tools) {
  Json out = Json::array();
  for (const Tool& t : tools) {
    Json f = Json::object();
    f["name"] = t.name;
    if (!t.description.empty()) f["description"] = t.description;
    if (!t.parameters.is_null()) f["parameters"] = t.parameters;
    out.push_back(Json{{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

bool ends_inside_think(const std::string& prompt) {
  const size_t open = prompt.rfind("<think>");
  return open != std::string::npos && prompt.find("</think>", open) == std::string::npos;
}

}  // namespace

std::vector<int32_t> eos_token_ids(const std::string& engine_dir) {
  std::vector<int32_t> eos;
  const fs::path path = fs::path(engine_dir) / "generation_config.json";
  if (!fs::exists(path)) return eos;
  const Json g = read_json_file(path);
  if (g.contains("eos_token_id")) {
    if (g["eos_token_id"].is_array()) {
      for (const auto& v : g["eos_token_id"]) eos.push_back(v.get<int32_t>());
    } else if (g["eos_token_id"].is_number_integer()) {
      eos.push_back(g["eos_token_id"].get<int32_t>());
    }
  }
  return eos;
}

FifoEngineLoop::FifoEngineLoop(const std::string& engine_dir, TokenEngine& engine, ModelInfo model,
                               size_t queue_capacity)
    : engine_(engine), model_(std::move(model)), capacity_(queue_capacity),
      tokenizer_(Tokenizer::load((fs::path(engine_dir) / "tokenizer.json").string())) {
  const fs::path dir(engine_dir);
  const fs::path cfg_path = dir / "tokenizer_config.json";
  if (fs::exists(cfg_path)) {
    const Json cfg = read_json_file(cfg_path);
    if (cfg.contains("chat_template") && cfg["chat_template"].is_string())
      template_ = ChatTemplate::compile(cfg["chat_template"].get<std::string>());
    template_vars_["bos_token"] = token_string(cfg, "bos_token");
    template_vars_["eos_token"] = token_string(cfg, "eos_token");
  }
  eos_ = eos_token_ids(engine_dir);
  thread_ = std::thread([this] { run(); });
}

FifoEngineLoop::~FifoEngineLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (Job& j : queue_) j.sink->cancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string FifoEngineLoop::render_chat(const CompletionRequest& r) const {
  if (!template_) throw ProtocolError(400, "this model has no chat template; use /v1/completions", "messages");
  Json ctx = template_vars_;
  ctx["messages"] = messages_json(r.messages);
  if (!r.tools.empty() && r.tool_choice.mode != ToolChoice::Mode::kNone) ctx["tools"] = tools_json(r.tools);
  ctx["add_generation_prompt"] = true;
  if (r.enable_thinking) ctx["enable_thinking"] = *r.enable_thinking;
  try {
    return template_->render(ctx);
  } catch (const ProtocolError&) {
    throw;
  } catch (const Error& e) {
    throw ProtocolError(400, std::string("the chat template refused the conversation: ") + e.what(), "messages");
  }
}

Submitted FifoEngineLoop::submit(const CompletionRequest& r, std::shared_ptr<RequestSink> sink) {
  if (r.logprobs) throw ProtocolError(400, "logprobs are not supported by this server yet", "logprobs");
  Submitted s;
  std::vector<int32_t> ids;
  if (r.kind == CompletionRequest::Kind::kChat) {
    const std::string prompt = render_chat(r);
    s.reasoning_open = ends_inside_think(prompt);
    ids = tokenizer_.encode(prompt);
  } else if (const auto* text = std::get_if<std::string>(&r.prompt)) {
    ids = tokenizer_.encode(*text);
  } else {
    ids = std::get<std::vector<int32_t>>(r.prompt);
    for (int32_t id : ids)
      if (id < 0 || id >= engine_.vocab())
        throw ProtocolError(400, fmt::format("token id {} is outside the vocabulary [0, {})", id, engine_.vocab()), "prompt");
  }
  if (ids.empty()) throw ProtocolError(400, "the prompt encodes to no tokens", r.kind == CompletionRequest::Kind::kChat ? "messages" : "prompt");
  const int64_t ctx = engine_.max_context();
  const int64_t n = int64_t(ids.size());
  if (n >= ctx)
    throw ProtocolError(400, fmt::format("This model's maximum context length is {} tokens; the prompt has {} tokens.", ctx, n),
                        r.kind == CompletionRequest::Kind::kChat ? "messages" : "prompt", "invalid_request_error",
                        "context_length_exceeded");
  int64_t max_tokens = ctx - n;
  if (r.max_tokens) {
    if (n + *r.max_tokens > ctx)
      throw ProtocolError(400, fmt::format("This model's maximum context length is {} tokens; the prompt ({} tokens) plus "
                                           "max_tokens ({}) exceed it.", ctx, n, *r.max_tokens),
                          "max_tokens", "invalid_request_error", "context_length_exceeded");
    max_tokens = *r.max_tokens;
  }
  s.prompt_tokens = n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= capacity_)
      throw ProtocolError(503, fmt::format("the server is busy: {} requests are queued; retry later", queue_.size()), "",
                          "server_error", "server_busy");
    s.id = next_id_++;
    queue_.push_back(Job{s.id, std::move(ids), max_tokens, r, std::move(sink)});
  }
  cv_.notify_one();
  return s;
}

void FifoEngineLoop::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (job.sink->cancelled()) {
      std::fprintf(stderr, "[serve] request %llu: cancelled while queued\n", (unsigned long long)job.id);
      continue;
    }
    Generation g(job.id, job.request, std::move(job.prompt), job.max_tokens, tokenizer_, eos_, job.sink, nullptr);
    try {
      const float* logits = engine_.prefill(g.prompt());
      int64_t pos = int64_t(g.prompt().size());
      while (const std::optional<int32_t> next = g.step(logits, engine_.vocab(), pos)) {
        logits = engine_.decode(*next, pos);
        ++pos;
      }
    } catch (const std::exception& e) {
      g.fail(e.what());
    }
  }
}

// ---- HttpServer ----

namespace {

std::mt19937_64& id_rng() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32)};
  return rng;
}

void send_error(httplib::Response& res, const ProtocolError& e) {
  res.status = e.status();
  if (e.status() == 503) res.set_header("Retry-After", "1");
  res.set_content(error_body(e).dump(), "application/json");
}

// Accumulates one response: runs the loop's text through the output parser (chat) and builds the
// objects OpenAI sends.
struct Response {
  bool chat;
  ResponseMeta meta;
  OutputParser parser;
  AssistantTurn turn;  // chat, non-streamed
  std::string text;    // completions, non-streamed
  Usage usage;

  Response(bool chat, ResponseMeta meta, bool reasoning_open, bool tools)
      : chat(chat), meta(std::move(meta)),
        parser(OutputParser::Options{reasoning_open, tools}, std::mt19937_64(id_rng()())) {}

  FinishReason finish(FinishReason f) const {
    return chat && parser.tool_calls() > 0 ? FinishReason::kToolCalls : f;
  }
};

}  // namespace

struct HttpServer::Impl {
  EngineLoop& loop;
  ServerOptions options;
  httplib::Server server;

  Impl(EngineLoop& loop, ServerOptions options) : loop(loop), options(std::move(options)) {}

  void authorize(const httplib::Request& req) const {
    if (options.api_key.empty()) return;
    const std::string want = "Bearer " + options.api_key;
    if (req.get_header_value("Authorization") != want)
      throw ProtocolError(401, "Incorrect or missing API key: send it as 'Authorization: Bearer KEY'.", "",
                          "invalid_request_error", "invalid_api_key");
  }

  void completion(const httplib::Request& req, httplib::Response& res, bool chat) {
    try {
      authorize(req);
      const Json body = parse_json_body(req.body);
      CompletionRequest r = chat ? parse_chat_request(body) : parse_completion_request(body);
      if (r.model != loop.model().id)
        throw ProtocolError(404, fmt::format("The model '{}' does not exist; this server serves '{}'.", r.model,
                                             loop.model().id), "model", "invalid_request_error", "model_not_found");
      auto sink = std::make_shared<RequestSink>();
      const Submitted sub = loop.submit(r, sink);
      ResponseMeta meta;
      meta.id = random_id(chat ? "chatcmpl-" : "cmpl-", 24, id_rng());
      meta.created = int64_t(std::time(nullptr));
      meta.model = loop.model().id;
      meta.stream_usage = r.stream && r.include_usage;
      const bool tools = !r.tools.empty() && r.tool_choice.mode != ToolChoice::Mode::kNone;
      auto state = std::make_shared<Response>(chat, meta, sub.reasoning_open, tools);
      state->usage.prompt_tokens = sub.prompt_tokens;
      if (!r.stream) {
        respond_whole(res, *state, *sink);
      } else {
        stream(res, state, sink, r.include_usage);
      }
    } catch (const ProtocolError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, ProtocolError(500, e.what(), "", "server_error"));
    }
  }

  void respond_whole(httplib::Response& res, Response& s, RequestSink& sink) {
    for (;;) {
      std::optional<TokenEvent> ev = sink.pop(std::chrono::milliseconds(1000));
      if (!ev) continue;
      if (!ev->error.empty()) throw ProtocolError(500, ev->error, "", "server_error");
      if (!ev->done) {
        if (s.chat) {
          for (const OutputEvent& o : s.parser.push(ev->text)) s.turn.add(o);
        } else {
          s.text += ev->text;
        }
        continue;
      }
      Json out;
      if (s.chat) {
        for (const OutputEvent& o : s.parser.finish()) s.turn.add(o);
        out = chat_completion_json(s.meta, s.turn, s.finish(ev->finish), ev->usage);
      } else {
        out = completion_json(s.meta, s.text, ev->finish, ev->usage);
      }
      res.set_content(out.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
      return;
    }
  }

  void stream(httplib::Response& res, std::shared_ptr<Response> s, std::shared_ptr<RequestSink> sink, bool include_usage) {
    res.set_header("Cache-Control", "no-cache");
    auto started = std::make_shared<bool>(false);
    auto idle = std::make_shared<int>(0);
    res.set_chunked_content_provider(
        "text/event-stream",
        [s, sink, started, idle, include_usage](size_t, httplib::DataSink& out) -> bool {
          auto send = [&](const Json& j) {
            const std::string d = sse_data(j);
            return out.write(d.data(), d.size());
          };
          if (!*started) {
            *started = true;
            if (s->chat && !send(chat_chunk_json(s->meta, chat_role_delta()))) return sink->cancel(), false;
            return true;
          }
          std::optional<TokenEvent> ev = sink->pop(std::chrono::milliseconds(200));
          if (!ev) {
            // Waiting (queued, or a long prefill): an SSE comment every second finds a client that
            // hung up, since a write to a closed connection fails.
            if (++*idle % 5 == 0) {
              static constexpr std::string_view kKeepAlive = ": keep-alive\n\n";
              if (!out.write(kKeepAlive.data(), kKeepAlive.size())) return sink->cancel(), false;
            }
            if (!out.is_writable()) return sink->cancel(), false;
            return true;
          }
          *idle = 0;
          if (!ev->error.empty()) {
            send(error_body(ProtocolError(500, ev->error, "", "server_error")));
            out.write(kSseDone.data(), kSseDone.size());
            out.done();
            return true;
          }
          if (!ev->done) {
            if (s->chat) {
              for (const OutputEvent& o : s->parser.push(ev->text))
                if (!send(chat_chunk_json(s->meta, chat_event_delta(o)))) return sink->cancel(), false;
            } else if (!send(completion_chunk_json(s->meta, ev->text))) {
              return sink->cancel(), false;
            }
            return true;
          }
          bool ok = true;
          if (s->chat) {
            for (const OutputEvent& o : s->parser.finish()) ok = ok && send(chat_chunk_json(s->meta, chat_event_delta(o)));
            ok = ok && send(chat_chunk_json(s->meta, Json::object(), s->finish(ev->finish)));
            if (include_usage) ok = ok && send(chat_usage_chunk_json(s->meta, ev->usage));
          } else {
            ok = ok && send(completion_chunk_json(s->meta, "", ev->finish));
            if (include_usage) ok = ok && send(completion_usage_chunk_json(s->meta, ev->usage));
          }
          ok = ok && out.write(kSseDone.data(), kSseDone.size());
          if (!ok) return sink->cancel(), false;
          out.done();
          return true;
        },
        [sink](bool) { sink->cancel(); });  // after done() this is a no-op: the loop has finished
  }

  void models(const httplib::Request& req, httplib::Response& res) {
    try {
      authorize(req);
      Json m = Json::object();
      m["id"] = loop.model().id;
      m["object"] = "model";
      m["created"] = 0;
      m["owned_by"] = "rocket";
      m["rocket"] = loop.model().metadata;
      Json out = Json::object();
      out["object"] = "list";
      out["data"] = Json::array({m});
      res.set_content(out.dump(), "application/json");
    } catch (const ProtocolError& e) {
      send_error(res, e);
    }
  }
};

HttpServer::HttpServer(EngineLoop& loop, ServerOptions options)
    : impl_(std::make_unique<Impl>(loop, std::move(options))) {
  Impl& im = *impl_;
  im.server.Post("/v1/chat/completions",
                 [&im](const httplib::Request& q, httplib::Response& s) { im.completion(q, s, true); });
  im.server.Post("/v1/completions", [&im](const httplib::Request& q, httplib::Response& s) { im.completion(q, s, false); });
  im.server.Get("/v1/models", [&im](const httplib::Request& q, httplib::Response& s) { im.models(q, s); });
  im.server.Get("/health", [](const httplib::Request&, httplib::Response& s) {
    s.set_content(R"({"status":"ok"})", "application/json");
  });
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::run() {
  if (!impl_->server.bind_to_port(impl_->options.host.c_str(), impl_->options.port))
    fail("serve: cannot listen on {}:{}", impl_->options.host, impl_->options.port);
  std::fprintf(stderr, "[serve] model '%s' listening on http://%s:%d\n", impl_->loop.model().id.c_str(),
               impl_->options.host.c_str(), impl_->options.port);
  impl_->server.listen_after_bind();
}

void HttpServer::stop() { impl_->server.stop(); }

}  // namespace rocket
