#include "http/server.h"

// cpp-httplib: one small dependency in Debian (libcpp-httplib-dev; header-only upstream, a header + .so
// there), thread-per-connection with chunked content providers that make SSE a loop over a blocking
// queue, and no TLS needed on loopback. Boost.Beast would mean Asio and far more code for the same.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <thread>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>

#include <fmt/ranges.h>

#include "anthropic/messages_request.h"
#include "anthropic/messages_response.h"
#include "core/error.h"
#include "http/bounded_server.h"
#include "http/connection.h"
#include "http/in_flight.h"
#include "http/sse.h"
#include "openai/output_parser.h"
#include "openai/prompt_builder.h"
#include "openai/protocol_error.h"
#include "openai/random_id.h"
#include "openai/responses_request.h"
#include "openai/responses_response.h"

namespace rocket {

using Json = nlohmann::ordered_json;

// ---- HttpServer ----

namespace {

std::mt19937_64& id_rng() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32)};
  return rng;
}

// A request that failed in the engine loop, as the error its client gets.
ProtocolError engine_error(const TokenEvent& ev) {
  return ProtocolError(ev.error_status, ev.error, "", ev.error_status < 500 ? "invalid_request_error" : "server_error");
}

void send_error(httplib::Response& res, const ProtocolError& e, const Json& body) {
  res.status = e.status();
  if (e.status() == 503) res.set_header("Retry-After", "1");
  res.set_content(body.dump(), "application/json");
}
void send_error(httplib::Response& res, const ProtocolError& e) { send_error(res, e, error_body(e)); }
// The Messages API's endpoints answer in Anthropic's error shape.
void send_messages_error(httplib::Response& res, const ProtocolError& e) { send_error(res, e, messages_error_body(e)); }

// What every object of a new response shares: its id ("chatcmpl-…", "resp_…", "msg_…"), time and model.
ResponseMeta response_meta(std::string_view id_prefix, const std::string& model) {
  ResponseMeta meta;
  meta.id = random_id(id_prefix, 24, id_rng());
  meta.created = int64_t(std::time(nullptr));
  meta.model = model;
  return meta;
}

// Request headers that change no token and say which client, session and API version sent it: recorded
// on the request's span beside the body's bookkeeping.
void record_client_headers(const httplib::Request& req, CompletionRequest& r) {
  for (const char* name : {"user-agent", "anthropic-version", "anthropic-beta", "x-claude-code-session-id", "session-id",
                           "x-session-id", "originator"})
    if (req.has_header(name)) r.client_attributes.emplace_back(std::string("header.") + name, req.get_header_value(name));
}

// The output parser of a chat request. parallel_tool_calls=false allows one tool call, and so does a
// named tool_choice: it forces a call of that function, and a second call could name any other.
OutputParser::Options parser_options(const CompletionRequest& r, const Submitted& sub) {
  OutputParser::Options o;
  o.reasoning_open = sub.reasoning_open;
  o.format = sub.tool_call_format;
  if (o.format == ToolCallFormat::kXml) o.parameters = std::make_shared<const ParameterTypes>(parameter_types(r.tools));
  // A response_format answer is JSON under its grammar: a "<tool_call>" inside one of its strings is
  // text, and the grammar leaves the model no way to call a tool.
  o.tool_calls = !r.tools.empty() && r.tool_choice.mode != ToolChoice::Mode::kNone &&
                 r.response_format.kind == ResponseFormat::Kind::kText;
  if (!r.parallel_tool_calls || r.tool_choice.mode == ToolChoice::Mode::kFunction) o.max_tool_calls = 1;
  return o;
}

// Accumulates one response: runs the loop's text through the output parser (chat), collects the
// logprobs, and builds the objects OpenAI sends.
struct Response {
  bool chat;
  ResponseMeta meta;
  OutputParser parser;
  AssistantTurn turn;  // chat, non-streamed
  std::string text;    // completions, non-streamed
  bool logprobs;
  std::vector<TokenLogprob> tokens;  // logprobs not yet sent (streamed), or all of them
  int64_t text_offset = 0;           // completions: where the next logprobs' text starts

  // `sub`: whether the request's rendered prompt ends inside <think>, and the fuel's tool-call format.
  Response(const CompletionRequest& r, ResponseMeta meta, const Submitted& sub)
      : chat(r.kind == CompletionRequest::Kind::kChat), meta(std::move(meta)),
        parser(parser_options(r, sub), std::mt19937_64(id_rng()())), logprobs(r.logprobs) {
    // tool_choice required / named: the prompt ends with the opening of the call, which the output
    // continues (openai/prompt_builder.h).
    parser.prime(forced_opening(r, sub.reasoning_open, sub.tool_call_format));
  }

  // Chat: the parser's events for a text event of the loop, whose logprobs it collects. Once the turn
  // is complete (it has its last allowed tool call) the loop is asked to stop the request, and what
  // it sends until it has stopped is dropped.
  std::vector<OutputEvent> parse(TokenEvent& ev, RequestSink& sink) {
    if (parser.complete()) return {};
    add_logprobs(ev.logprobs);
    std::vector<OutputEvent> events = parser.push(ev.text);
    if (parser.complete()) sink.request_stop(meta.choice);
    return events;
  }

  FinishReason finish(FinishReason f) const {
    return chat && parser.tool_calls() > 0 ? FinishReason::kToolCalls : f;
  }

  void add_logprobs(std::vector<TokenLogprob>& more) {
    tokens.insert(tokens.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }

  // The logprobs member of the next chunk: the tokens not sent yet; null when there are none (or none
  // were asked for). A non-streamed response takes them all, so with logprobs asked for it is never
  // null.
  Json take_logprobs(bool whole = false) {
    if (!logprobs || (tokens.empty() && !whole)) return nullptr;
    Json j = chat ? chat_logprobs_json(tokens) : completion_logprobs_json(tokens, text_offset);
    tokens.clear();
    return j;
  }
};

// A request's choices (n of them, one Response each, choices[i] with meta.choice = i) and what their
// final events brought: the usage counts the prompt once and every choice's completion tokens.
struct Choices {
  std::deque<Response> each;  // not moved once built (the output parser stays put)
  int done = 0;
  Usage usage;

  Choices(const CompletionRequest& r, const ResponseMeta& meta, const Submitted& sub) {
    for (int i = 0; i < int(r.n); ++i) {
      ResponseMeta m = meta;
      m.choice = i;
      each.emplace_back(r, std::move(m), sub);
    }
  }
  Response& of(const TokenEvent& ev) { return each.at(size_t(ev.choice)); }
  // A choice's final event; true when it was the last choice's.
  bool finish(const TokenEvent& ev) {
    if (ev.choice == 0) usage.prompt_tokens = ev.usage.prompt_tokens, usage.cached_tokens = ev.usage.cached_tokens;
    usage.completion_tokens += ev.usage.completion_tokens;
    return ++done == int(each.size());
  }
};

// One /v1/responses answer: the chat response's parser, whose events the Responses state machine
// turns into items, and the completion tokens spent while the parser was inside the reasoning.
struct ResponsesState {
  Response chat;
  ResponsesStream stream;
  int64_t reasoning_tokens = 0;

  ResponsesState(const CompletionRequest& r, const ResponseMeta& meta, const Submitted& sub, Json echo,
                 ResponsesStream::Options options)
      : chat(r, meta, sub),
        stream(meta.id, meta.created, meta.model, std::move(echo), std::mt19937_64(id_rng()()), std::move(options)) {}

  // The Responses events of a text event of the loop.
  std::vector<Json> events(TokenEvent& ev, RequestSink& sink) {
    const bool reasoning = chat.parser.reasoning();
    std::vector<Json> out;
    for (const OutputEvent& o : chat.parse(ev, sink))
      for (Json& e : stream.on(o)) out.push_back(std::move(e));
    if (reasoning || chat.parser.reasoning()) reasoning_tokens += ev.tokens;
    return out;
  }
  // The events that end the response, at the loop's final event.
  std::vector<Json> finish(const TokenEvent& ev) {
    std::vector<Json> out;
    for (const OutputEvent& o : chat.parser.finish())
      for (Json& e : stream.on(o)) out.push_back(std::move(e));
    for (Json& e : stream.finish(ev.finish, ev.usage, reasoning_tokens)) out.push_back(std::move(e));
    return out;
  }
  Json error(const ProtocolError& e) { return stream.error(e); }
  const Json& whole() const { return stream.response(); }
};

// One /v1/messages answer: the chat response's parser, whose events the Messages state machine turns
// into content blocks.
struct MessagesState {
  Response chat;
  MessagesStream stream;

  MessagesState(const CompletionRequest& r, const ResponseMeta& meta, const Submitted& sub, MessagesStream::Options options)
      : chat(r, meta, sub), stream(meta.id, meta.model, sub.prompt_tokens, std::move(options)) {}

  std::vector<Json> events(TokenEvent& ev, RequestSink& sink) {
    std::vector<Json> out;
    for (const OutputEvent& o : chat.parse(ev, sink))
      for (Json& e : stream.on(o)) out.push_back(std::move(e));
    return out;
  }
  std::vector<Json> finish(const TokenEvent& ev) {
    std::vector<Json> out;
    for (const OutputEvent& o : chat.parser.finish())
      for (Json& e : stream.on(o)) out.push_back(std::move(e));
    for (Json& e : stream.finish(ev.finish, ev.stop, chat.parser.tool_calls() > 0, ev.usage)) out.push_back(std::move(e));
    return out;
  }
  Json error(const ProtocolError& e) { return messages_error_body(e); }
  const Json& whole() const { return stream.message(); }
};

// A response the client waits for whole: its next event, polling the client's socket (at most every
// 200 ms, however fast the events come) for a hang-up, which cancels the request: then nullopt.
struct WholeResponse {
  static constexpr auto kPoll = std::chrono::milliseconds(200);
  int fd = BoundedServer::current_socket();  // < 0: no socket to poll
  std::chrono::steady_clock::time_point next_poll = std::chrono::steady_clock::now() + kPoll;

  std::optional<TokenEvent> next(RequestSink& sink, uint64_t id);
};

std::optional<TokenEvent> WholeResponse::next(RequestSink& sink, uint64_t id) {
  for (;;) {
    std::optional<TokenEvent> ev = sink.pop(kPoll);
    if (fd >= 0 && std::chrono::steady_clock::now() >= next_poll) {
      next_poll = std::chrono::steady_clock::now() + kPoll;
      if (peer_closed(fd)) {
        sink.cancel();
        std::fprintf(stderr, "[serve] request %llu: the client hung up before the response\n", (unsigned long long)id);
        return std::nullopt;
      }
    }
    if (ev) return ev;
  }
}

// A stream that has nothing to send yet (queued, or a long prefill): an SSE comment every second finds
// a client that hung up, since a write to a closed connection fails. False: the client is gone.
bool keep_alive(httplib::DataSink& out, int& idle) {
  if (++idle % 5 == 0) {
    static constexpr std::string_view kKeepAlive = ": keep-alive\n\n";
    if (!out.write(kKeepAlive.data(), kKeepAlive.size())) return false;
  }
  return out.is_writable();
}

}  // namespace

struct HttpServer::Impl {
  ServerOptions options;
  BoundedServer server;
  std::thread thread;
  std::mutex mu;
  std::condition_variable stopped_cv;
  bool stopped = false;
  std::string phase = "upright";
  std::string handshake;  // GET /handshake's body, once upright has it (guarded by mu)
  std::atomic<EngineLoop*> loop{nullptr};
  std::atomic<int64_t> responses{0};  // completions being answered (http/in_flight.h)

  explicit Impl(ServerOptions options) : options(std::move(options)) {}

  std::string current_phase() {
    std::lock_guard<std::mutex> lock(mu);
    return phase;
  }

  // The loop, once launched. Before launch nothing is served (docs/countdown.md: no traffic before static fire).
  EngineLoop& launched() {
    EngineLoop* l = loop.load();
    if (!l)
      throw ProtocolError(503, fmt::format("the engine is not launched yet (countdown phase: {}); retry later",
                                           current_phase()), "", "server_error", "not_launched");
    return *l;
  }

  // The names `model` may take (ServerOptions::served_model_names).
  std::vector<std::string> model_names(const EngineLoop& engine) const {
    if (options.served_model_names.empty()) return {engine.model().id};
    return options.served_model_names;
  }

  // A refusal, counted by its reason on /metrics.
  void count_refusal(const ProtocolError& e) {
    if (options.telemetry)
      if (std::optional<Refusal> why = refusal_of(e.status(), e.code())) options.telemetry->metrics().refused(*why);
  }

  void check_model(const EngineLoop& engine, const std::string& model) const {
    if (const auto names = model_names(engine); std::find(names.begin(), names.end(), model) == names.end())
      throw ProtocolError(404, fmt::format("The model '{}' does not exist; this server serves '{}'.", model,
                                           fmt::join(names, "', '")), "model", "invalid_request_error", "model_not_found");
  }

  // Anthropic's clients send the key as x-api-key (or, with an auth token, as a Bearer header).
  void authorize_anthropic(const httplib::Request& req) const {
    if (options.api_keys.empty()) return;
    if (req.has_header("x-api-key") && options.api_keys.accepts("Bearer " + req.get_header_value("x-api-key"))) return;
    if (options.api_keys.accepts(req.get_header_value("Authorization"))) return;
    throw ProtocolError(401, "Incorrect or missing API key: send it as 'x-api-key: KEY'.", "", "invalid_request_error",
                        "invalid_api_key");
  }

  // TEST-ONLY (ServerOptions::forced_tokens): the forced sequence an agent's turn asks for by header.
  void force_by_header(const httplib::Request& req, CompletionRequest& r) const {
    if (!options.forced_tokens || !req.has_header("x-rocket-force")) return;
    const auto results = std::count_if(r.messages.begin(), r.messages.end(), [](const ChatMessage& m) { return m.role == "tool"; });
    r.user = fmt::format("{}.{}", req.get_header_value("x-rocket-force"), results);
  }

  // Tokens of the prefix cache's page, as the model's metadata reports it (0 where it keeps none).
  static int64_t page_tokens(const EngineLoop& engine) {
    const auto& m = engine.model().metadata;
    return m.contains("kv_page_tokens") && m["kv_page_tokens"].is_number_integer() ? m["kv_page_tokens"].get<int64_t>() : 0;
  }

  void authorize(const httplib::Request& req) const {
    if (options.api_keys.empty()) return;
    if (!options.api_keys.accepts(req.get_header_value("Authorization")))
      throw ProtocolError(401, "Incorrect or missing API key: send it as 'Authorization: Bearer KEY'.", "",
                          "invalid_request_error", "invalid_api_key");
  }

  // Which error shape a completion endpoint answers in: OpenAI's, or Anthropic's for /v1/messages
  // (whose clients also send their key as x-api-key).
  enum class Api { kOpenAi, kAnthropic };

  // The set-up and the catch every completion endpoint shares (/v1/chat/completions, /v1/completions,
  // /v1/responses, /v1/messages): the response is counted in flight until it is written (a drain waits
  // for it), the key is checked, the engine must be launched and the body must be JSON within the
  // depth bound; a failure anywhere, `answer` included, is answered in the API's error shape, a
  // refusal counted on /metrics by its reason. `answer(engine, body, in_flight)` parses the body as
  // its endpoint's request and answers it (whole or streamed, the stream holding `in_flight`).
  template <typename Answer>
  void completion(const httplib::Request& req, httplib::Response& res, Api api, Answer&& answer) {
    auto in_flight = std::make_shared<InFlight>(responses);
    const auto refuse = [&](const ProtocolError& e) {
      api == Api::kAnthropic ? send_messages_error(res, e) : send_error(res, e);
    };
    try {
      api == Api::kAnthropic ? authorize_anthropic(req) : authorize(req);
      EngineLoop& engine = launched();
      answer(engine, parse_json_body(req.body, options.max_json_depth), in_flight);
    } catch (const ProtocolError& e) {
      count_refusal(e);
      refuse(e);
    } catch (const std::exception& e) {
      refuse(ProtocolError(500, e.what(), "", "server_error"));
    }
  }

  // What every parsed completion request gets before it is submitted: its W3C trace parent and client
  // headers on its span, and a model this server serves (else 404).
  void admit(const httplib::Request& req, const EngineLoop& engine, CompletionRequest& r) const {
    r.trace_parent = parse_traceparent(req.get_header_value("traceparent"));
    record_client_headers(req, r);
    check_model(engine, r.model);
  }

  // Submits an admitted request to the loop, its TEST-ONLY forced tokens by header set first (after
  // anything that changes its messages: they count the tool results).
  Submitted submit(const httplib::Request& req, EngineLoop& engine, CompletionRequest& r,
                   std::shared_ptr<RequestSink> sink) const {
    force_by_header(req, r);
    return engine.submit(r, std::move(sink));
  }

  // POST /v1/chat/completions (`chat`) and /v1/completions: n choices, answered whole or as chunks.
  void chat_or_completion(const httplib::Request& req, httplib::Response& res, bool chat) {
    completion(req, res, Api::kOpenAi, [&](EngineLoop& engine, const Json& body, std::shared_ptr<InFlight> in_flight) {
      CompletionRequest r = chat ? parse_chat_request(body, options.images) : parse_completion_request(body);
      admit(req, engine, r);
      auto sink = std::make_shared<RequestSink>(int(r.n));
      const Submitted sub = submit(req, engine, r, sink);
      ResponseMeta meta = response_meta(chat ? "chatcmpl-" : "cmpl-", r.model);
      meta.stream_usage = r.stream && r.include_usage;
      auto state = std::make_shared<Choices>(r, meta, sub);
      if (!r.stream) {
        respond_whole(req, res, *state, *sink, sub.id);
      } else {
        stream(res, state, sink, r.include_usage, std::move(in_flight));
      }
    });
  }

  void respond_whole(const httplib::Request& req, httplib::Response& res, Choices& all, RequestSink& sink, uint64_t id) {
    WholeResponse whole;
    std::vector<Json> choices(all.each.size());
    for (;;) {
      std::optional<TokenEvent> ev = whole.next(sink, id);
      if (!ev) return;
      if (!ev->error.empty()) {
        sink.cancel();  // the other choices stop too: the response is an error
        throw engine_error(*ev);
      }
      Response& s = all.of(*ev);
      if (!ev->done) {
        if (s.chat) {
          for (const OutputEvent& o : s.parse(*ev, sink)) s.turn.add(o);
        } else {
          s.add_logprobs(ev->logprobs);
          s.text += ev->text;
        }
        continue;
      }
      // Each choice's object as one choice would be answered; the response takes their choices.
      if (s.chat) {
        for (const OutputEvent& o : s.parser.finish()) s.turn.add(o);
        choices[size_t(ev->choice)] =
            chat_completion_json(s.meta, s.turn, s.finish(ev->finish), ev->usage, s.take_logprobs(/*whole=*/true));
      } else {
        choices[size_t(ev->choice)] = completion_json(s.meta, s.text, ev->finish, ev->usage, s.take_logprobs(/*whole=*/true));
      }
      if (!all.finish(*ev)) continue;
      Json out = std::move(choices[0]);
      for (size_t i = 1; i < choices.size(); ++i) out["choices"].push_back(std::move(choices[i]["choices"][0]));
      out["usage"] = usage_json(all.usage);
      res.set_content(out.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
      return;
    }
  }

  // Chunks of every choice interleaved as the loop produces them, each carrying its choice's index.
  void stream(httplib::Response& res, std::shared_ptr<Choices> all, std::shared_ptr<RequestSink> sink, bool include_usage,
              std::shared_ptr<InFlight> in_flight) {
    res.set_header("Cache-Control", "no-cache");
    auto started = std::make_shared<bool>(false);
    auto idle = std::make_shared<int>(0);
    res.set_chunked_content_provider(
        "text/event-stream",
        [all, sink, started, idle, include_usage, in_flight](size_t, httplib::DataSink& out) -> bool {
          auto send = [&](const Json& j) {
            const std::string d = sse_data(j);
            return out.write(d.data(), d.size());
          };
          // A chat chunk for one parser event, carrying the logprobs received since the last chunk.
          auto send_event = [&](Response& s, const OutputEvent& o) {
            return send(chat_chunk_json(s.meta, chat_event_delta(o), std::nullopt, s.take_logprobs()));
          };
          if (!*started) {
            *started = true;
            for (Response& s : all->each)
              if (s.chat && !send(chat_chunk_json(s.meta, chat_role_delta()))) return sink->cancel(), false;
            return true;
          }
          std::optional<TokenEvent> ev = sink->pop(std::chrono::milliseconds(200));
          if (!ev) return keep_alive(out, *idle) || (sink->cancel(), false);
          *idle = 0;
          if (!ev->error.empty()) {
            sink->cancel();  // the other choices stop too: the stream ends with the error
            send(error_body(engine_error(*ev)));
            out.write(kSseDone.data(), kSseDone.size());
            out.done();
            return true;
          }
          Response& s = all->of(*ev);
          if (!ev->done) {
            if (s.chat) {
              for (const OutputEvent& o : s.parse(*ev, *sink))
                if (!send_event(s, o)) return sink->cancel(), false;
            } else {
              s.add_logprobs(ev->logprobs);
              if ((!ev->text.empty() || !s.tokens.empty()) &&
                  !send(completion_chunk_json(s.meta, ev->text, std::nullopt, s.take_logprobs())))
                return sink->cancel(), false;
            }
            return true;
          }
          bool ok = true;
          if (s.chat) {
            for (const OutputEvent& o : s.parser.finish()) ok = ok && send_event(s, o);
            ok = ok && send(chat_chunk_json(s.meta, Json::object(), s.finish(ev->finish), s.take_logprobs()));
          } else {
            ok = ok && send(completion_chunk_json(s.meta, "", ev->finish, s.take_logprobs()));
          }
          if (!ok) return sink->cancel(), false;
          if (!all->finish(*ev)) return true;
          if (include_usage)
            ok = s.chat ? send(chat_usage_chunk_json(s.meta, all->usage)) : send(completion_usage_chunk_json(s.meta, all->usage));
          ok = ok && out.write(kSseDone.data(), kSseDone.size());
          if (!ok) return sink->cancel(), false;
          out.done();
          return true;
        },
        [sink](bool) { sink->cancel(); });  // after done() this is a no-op: the loop has finished
  }

  // POST /v1/responses: the chat request it translates to (openai/responses_request.h), answered as a
  // response object or its event stream (openai/responses_response.h).
  void responses_api(const httplib::Request& req, httplib::Response& res) {
    completion(req, res, Api::kOpenAi, [&](EngineLoop& engine, const Json& body, std::shared_ptr<InFlight> in_flight) {
      ResponsesRequest rr = parse_responses_request(body, options.images);
      CompletionRequest& r = rr.chat;
      admit(req, engine, r);
      auto sink = std::make_shared<RequestSink>(1);
      Submitted sub;
      try {
        sub = submit(req, engine, r, sink);
      } catch (const ProtocolError& e) {
        throw responses_error(e);
      }
      ResponsesStream::Options options{.encrypted_reasoning = rr.encrypted_reasoning, .namespace_of = std::move(rr.namespace_of)};
      answer_named_events(res,
                          std::make_shared<ResponsesState>(r, response_meta("resp_", r.model), sub, std::move(rr.echo),
                                                           std::move(options)),
                          sink, sub.id, r.stream, std::move(in_flight));
    });
  }

  // A Responses or Messages answer (State: ResponsesState or MessagesState): the whole object once
  // the output ends, or its events as they come, each as `event:` + `data:`.
  template <typename State>
  void answer_named_events(httplib::Response& res, std::shared_ptr<State> state, std::shared_ptr<RequestSink> sink,
                           uint64_t id, bool stream, std::shared_ptr<InFlight> in_flight) {
    if (!stream) {
      WholeResponse whole;
      for (;;) {
        std::optional<TokenEvent> ev = whole.next(*sink, id);
        if (!ev) return;
        if (!ev->error.empty()) throw engine_error(*ev);
        if (!ev->done) {
          state->events(*ev, *sink);
          continue;
        }
        state->finish(*ev);
        return res.set_content(state->whole().dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
      }
    }
    res.set_header("Cache-Control", "no-cache");
    auto started = std::make_shared<bool>(false);
    auto idle = std::make_shared<int>(0);
    res.set_chunked_content_provider(
        "text/event-stream",
        [state, sink, started, idle, in_flight](size_t, httplib::DataSink& out) -> bool {
          auto send = [&](const std::vector<Json>& events) {
            for (const Json& e : events) {
              const std::string d = sse_event(e);
              if (!out.write(d.data(), d.size())) return false;
            }
            return true;
          };
          if (!*started) {
            *started = true;
            return send(state->stream.start()) || (sink->cancel(), false);
          }
          std::optional<TokenEvent> ev = sink->pop(std::chrono::milliseconds(200));
          if (!ev) return keep_alive(out, *idle) || (sink->cancel(), false);
          *idle = 0;
          if (!ev->error.empty()) {
            sink->cancel();
            send({state->error(engine_error(*ev))});
            out.done();
            return true;
          }
          if (!ev->done) return send(state->events(*ev, *sink)) || (sink->cancel(), false);
          if (!send(state->finish(*ev))) return sink->cancel(), false;
          out.done();
          return true;
        },
        [sink](bool) { sink->cancel(); });
  }

  // POST /v1/messages (Anthropic's Messages API): the chat request it translates to
  // (anthropic/messages_request.h), answered as a message or its event stream
  // (anthropic/messages_response.h), errors in Anthropic's shape.
  void messages_api(const httplib::Request& req, httplib::Response& res) {
    completion(req, res, Api::kAnthropic, [&](EngineLoop& engine, const Json& body, std::shared_ptr<InFlight> in_flight) {
      MessagesRequest mr = parse_messages_request(body, false, options.images);
      CompletionRequest& r = mr.chat;
      admit(req, engine, r);
      // Context editing measures the prompt as the engine would build it.
      // (max_tokens is a cap here, as below: the count is the prompt's alone.)
      Json applied = apply_context_edits(mr, [&engine](const CompletionRequest& c) {
        CompletionRequest prompt = c;
        prompt.max_tokens.reset();
        return engine.report_prefix(prompt).prompt_tokens;
      });
      auto sink = std::make_shared<RequestSink>(1);
      Submitted sub;
      try {
        sub = submit(req, engine, r, sink);
      } catch (const ProtocolError& e) {
        // max_tokens is a cap in this API, and its clients send a large one (Claude Code: 32000) for
        // every turn: past the context it means "up to the context", not a refusal.
        if (e.code() != "context_length_exceeded" || e.param() != "max_tokens") throw;
        r.max_tokens.reset();
        sub = submit(req, engine, r, sink);
      }
      MessagesStream::Options o{.omit_thinking = mr.omit_thinking,
                                .page_tokens = page_tokens(engine),
                                .applied_edits = mr.context_management ? std::move(applied) : Json(nullptr),
                                .server_tools = !mr.server_tools.empty()};
      answer_named_events(res, std::make_shared<MessagesState>(r, response_meta("msg_", r.model), sub, std::move(o)), sink,
                          sub.id, r.stream, std::move(in_flight));
    });
  }

  // POST /v1/messages/count_tokens: the prompt's length as /v1/messages would build it.
  void count_tokens(const httplib::Request& req, httplib::Response& res) {
    try {
      authorize_anthropic(req);
      EngineLoop& engine = launched();
      const CompletionRequest r =
          parse_messages_request(parse_json_body(req.body, options.max_json_depth), true, options.images).chat;
      check_model(engine, r.model);
      res.set_content(Json{{"input_tokens", engine.report_prefix(r).prompt_tokens}}.dump(), "application/json");
    } catch (const ProtocolError& e) {
      send_messages_error(res, e);
    }
  }

  // POST /prefix/v1/chat/completions, /prefix/v1/completions, /prefix/v1/responses: the replicated
  // front asks, before it routes a request, how much of its prompt this replica's prefix cache holds
  // and how busy it is
  // (EngineLoop::report_prefix; front/route.h). The body is the request itself, checked as the
  // completion would check it and guarded by the same api keys: the answer says what prompts were
  // served here.
  void prefix(const httplib::Request& req, httplib::Response& res, const std::string& path) {
    try {
      path == "/v1/messages" ? authorize_anthropic(req) : authorize(req);
      EngineLoop& engine = launched();
      const Json body = parse_json_body(req.body, options.max_json_depth);
      CompletionRequest r = path == "/v1/responses"        ? parse_responses_request(body, options.images).chat
                            : path == "/v1/messages"         ? parse_messages_request(body, false, options.images).chat
                            : path == "/v1/chat/completions" ? parse_chat_request(body, options.images)
                                                             : parse_completion_request(body);
      if (path == "/v1/messages") r.max_tokens.reset();  // a cap in that API (messages_api)
      const PrefixReport p = engine.report_prefix(r);
      const Json out = {{"prompt_tokens", p.prompt_tokens}, {"cached_tokens", p.cached_tokens},
                        {"resumable_tokens", p.resumable_tokens}, {"running", p.running}, {"waiting", p.waiting}};
      res.set_content(out.dump(), "application/json");
    } catch (const ProtocolError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, ProtocolError(500, e.what(), "", "server_error"));
    }
  }

  // GET /v1/models: every served name; GET /v1/models/{id} (`id`): that one, or 404.
  void models(const httplib::Request& req, httplib::Response& res, const std::optional<std::string>& id = std::nullopt) {
    try {
      authorize(req);
      EngineLoop& engine = launched();
      auto model = [&](const std::string& name) {
        Json m = Json::object();
        m["id"] = name;
        m["object"] = "model";
        m["created"] = 0;
        m["owned_by"] = "rocket";
        m["rocket"] = engine.model().metadata;
        return m;
      };
      if (id) {
        check_model(engine, *id);
        return res.set_content(model(*id).dump(), "application/json");
      }
      Json data = Json::array();
      for (const std::string& name : model_names(engine)) data.push_back(model(name));
      Json out = Json::object();
      out["object"] = "list";
      out["data"] = std::move(data);
      res.set_content(out.dump(), "application/json");
    } catch (const ProtocolError& e) {
      send_error(res, e);
    }
  }

  // The loop's counters (requests, tokens, cache pages) as JSON, unauthenticated like /health: they
  // carry no request content.
  void stats(httplib::Response& res) {
    try {
      res.set_content(launched().stats().dump(), "application/json");
    } catch (const ProtocolError& e) {
      send_error(res, e);
    }
  }

  // Prometheus text exposition (telemetry/metrics.h), unauthenticated like /health; from the start of
  // the countdown, with no load until launch.
  void metrics(httplib::Response& res) {
    if (!options.telemetry)
      return send_error(res, ProtocolError(503, "this server keeps no metrics", "", "server_error"));
    Load load;
    if (EngineLoop* l = loop.load()) {
      const Json st = l->stats();
      load = Load{.running = st.value("active", 0),
                  .waiting = st.value("waiting", 0),
                  .kv_pages_used = st.value("pages", 0) - st.value("pages_free", 0),
                  .kv_pages_total = st.value("pages", 0),
                  .snapshots_used = st.value("snapshots", 0) - st.value("snapshots_free", 0),
                  .snapshots_total = st.value("snapshots", 0)};
    }
    res.set_content(options.telemetry->metrics().scrape(load), "text/plain; version=0.0.4; charset=utf-8");
  }

  // 200 {"status": "ok"} only while launched and serving; 503 "starting" (the countdown), "draining"
  // (shutting down) or "failed" (the engine failed; the process is exiting), so a balancer stops
  // sending and a supervisor restarts.
  void health(httplib::Response& res) {
    const EngineLoop* l = loop.load();
    const LoopState state = l ? l->state() : LoopState{};
    const char* status = !l                                             ? "starting"
                         : state.status == LoopState::Status::kDraining ? "draining"
                         : state.status == LoopState::Status::kFailed   ? "failed"
                                                                        : "ok";
    const bool up = l && state.status == LoopState::Status::kServing;
    res.status = up ? 200 : 503;
    if (!up) res.set_header("Retry-After", "1");
    Json out = {{"status", status}, {"phase", current_phase()}};
    if (!state.reason.empty()) out["reason"] = state.reason;
    res.set_content(out.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
  }
};

size_t default_max_body_bytes(int64_t max_context) { return (size_t(1) << 20) + 64 * size_t(std::max<int64_t>(max_context, 0)); }

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& im = *impl_;
  im.server.new_task_queue = [n = im.options.http_threads] { return new httplib::ThreadPool(n); };
  im.server.set_payload_max_length(im.options.max_body_bytes);
  // httplib's own refusals (413, 400, and the head's 431/408/415) get OpenAI's error shape from
  // BoundedServer.
  im.server.Post("/v1/chat/completions",
                 [&im](const httplib::Request& q, httplib::Response& s) { im.chat_or_completion(q, s, true); });
  im.server.Post("/v1/completions", [&im](const httplib::Request& q, httplib::Response& s) { im.chat_or_completion(q, s, false); });
  im.server.Post("/v1/responses", [&im](const httplib::Request& q, httplib::Response& s) { im.responses_api(q, s); });
  im.server.Post("/v1/messages", [&im](const httplib::Request& q, httplib::Response& s) { im.messages_api(q, s); });
  im.server.Post("/v1/messages/count_tokens",
                 [&im](const httplib::Request& q, httplib::Response& s) { im.count_tokens(q, s); });
  for (const char* path : {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"})
    im.server.Post(std::string("/prefix") + path,
                   [&im, p = std::string(path)](const httplib::Request& q, httplib::Response& s) { im.prefix(q, s, p); });
  im.server.Get("/v1/models", [&im](const httplib::Request& q, httplib::Response& s) { im.models(q, s); });
  // Model names may hold '/' ("org/name", as --served-model-name takes them).
  im.server.Get("/v1/models/(.+)", [&im](const httplib::Request& q, httplib::Response& s) { im.models(q, s, q.matches[1].str()); });
  im.server.Get("/health", [&im](const httplib::Request&, httplib::Response& s) { im.health(s); });
  im.server.Get("/metrics", [&im](const httplib::Request&, httplib::Response& s) { im.metrics(s); });
  im.server.Get("/stats", [&im](const httplib::Request&, httplib::Response& s) { im.stats(s); });
  // The replica's plan identity and booster (boosters/handshake.h), unauthenticated like /health: the
  // front reads it before it routes here.
  im.server.Get("/handshake", [&im](const httplib::Request&, httplib::Response& s) {
    std::string body;
    {
      std::lock_guard<std::mutex> lock(im.mu);
      body = im.handshake;
    }
    if (body.empty())
      return send_error(s, ProtocolError(503, fmt::format("no handshake before upright has read the plan (countdown phase: {})",
                                                          im.current_phase()),
                                         "", "server_error", "not_launched"));
    s.set_content(body, "application/json");
  });
}

HttpServer::~HttpServer() {
  stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void HttpServer::start() {
  Impl& im = *impl_;
  if (!im.server.bind(im.options.host, im.options.port))
    fail("serve: cannot listen on {}:{}", im.options.host, im.options.port);
  std::fprintf(stderr, "[serve] listening on http://%s:%d (phase %s)\n", im.options.host.c_str(), im.options.port,
               im.current_phase().c_str());
  im.thread = std::thread([&im] {
    im.server.listen_after_bind();
    std::lock_guard<std::mutex> lock(im.mu);
    im.stopped = true;
    im.stopped_cv.notify_all();
  });
}

void HttpServer::set_phase(std::string phase) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->phase = std::move(phase);
}

void HttpServer::set_handshake(std::string json) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->handshake = std::move(json);
}

void HttpServer::launch(EngineLoop& loop) {
  set_phase("launch");
  impl_->loop.store(&loop);
  fmt::print(stderr, "[serve] launch: serving model '{}'\n", fmt::join(impl_->model_names(loop), "', '"));
}

bool HttpServer::wait_responses(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (impl_->responses.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void HttpServer::wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->stopped_cv.wait(lock, [&] { return impl_->stopped; });
}

void HttpServer::stop() {
  Impl& im = *impl_;
  if (!im.thread.joinable()) return;  // never started
  // httplib ignores stop() until its listen loop has begun, and a countdown can fail before that: wait
  // for the loop to be running (or already over).
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(im.mu);
      if (im.stopped) return;
    }
    if (im.server.is_running()) {
      im.server.stop();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace rocket
