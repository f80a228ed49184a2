#include "launch/launch_options.h"

#include <charconv>
#include <limits>

namespace rocket {

namespace {

// "512", "64K", "2M", "100000G": bytes, with a binary suffix.
uint64_t parse_bytes(const std::string& flag, const std::string& text) {
  uint64_t n = 0;
  const char* end = text.data() + text.size();
  const auto [rest, err] = std::from_chars(text.data(), end, n);
  const std::string suffix(rest, end);
  const int shift = suffix.empty() ? 0 : suffix == "K" ? 10 : suffix == "M" ? 20 : suffix == "G" ? 30 : -1;
  if (err != std::errc() || rest == text.data() || shift < 0)
    throw CLI::ValidationError(flag, text + " is not a byte count with an optional K, M or G suffix");
  if (n > (std::numeric_limits<uint64_t>::max() >> shift)) throw CLI::ValidationError(flag, text + " is too large");
  return n << shift;
}

}  // namespace

const char* const kLaunchEndpoints =
    "Endpoints (docs/api.md):\n"
    "  POST /v1/chat/completions      OpenAI chat: SSE streaming, tools, reasoning, logprobs, structured outputs\n"
    "  POST /v1/completions           OpenAI text completions\n"
    "  POST /v1/responses             OpenAI Responses API (nothing stored: previous_response_id is refused)\n"
    "  POST /v1/messages              Anthropic Messages API (the key as x-api-key too)\n"
    "  POST /v1/messages/count_tokens Anthropic's prompt token count\n"
    "  GET  /v1/models, /v1/models/{id}  the served model names (--served-model-name)\n"
    "  GET  /health                   200 ok once launched; 503 starting, draining or failed\n"
    "  GET  /metrics                  Prometheus text exposition\n"
    "  GET  /stats                    the scheduler's counters as JSON\n"
    "  POST /prefix/v1/{chat/completions,completions,responses,messages}  the prompt's cached prefix (rocket front)\n"
    "  GET  /handshake                the plan's identity and the booster (rocket front)\n"
    "/v1/* and /prefix/* need a key where --api-key, --api-key-file or ROCKET_API_KEY sets one; /health,\n"
    "/metrics, /stats and /handshake never do.";

void add_launch_options(CLI::App& cmd, LaunchOptions& o) {
  cmd.footer(kLaunchEndpoints);
  cmd.add_option("--host", o.server.host, "address to listen on")->capture_default_str();
  cmd.add_option("--port", o.server.port, "port to listen on")->check(in_range(1, 65535))->capture_default_str();
  cmd.add_option("--api-key", o.api_key,
                 "when set, /v1/* requires \"Authorization: Bearer KEY\" (visible in ps: prefer --api-key-file or "
                 "ROCKET_API_KEY)");
  cmd.add_option("--api-key-file", o.api_key_file, "accepted keys, one per line ('#' comments); with --api-key and "
                 "ROCKET_API_KEY, any of them is accepted")
      ->check(CLI::ExistingFile);
  cmd.add_option("--served-model-name", o.server.served_model_names,
                 "the names requests may give as `model`, all listed by /v1/models (vLLM's flag; default: the engine "
                 "directory's name)")
      ->check(CLI::Validator([](std::string& s) { return s.empty() ? std::string("a model name may not be empty") : std::string(); },
                             "NAME"));
  cmd.add_option("--queue", o.scheduler.queue_capacity, "requests waiting for a stream slot before 503")
      ->check(at_least(1))
      ->capture_default_str();
  cmd.add_option("--prefill-budget", o.scheduler.prefill_budget,
                 "prompt tokens prefilled per step while streams decode (0: 128, or one prefill call where a call is longer)")
      ->check(at_least(0))
      ->capture_default_str();
  cmd.add_option_function<std::string>(
         "--reserve", [&o](const std::string& text) { o.reserve_bytes = parse_bytes("--reserve", text); },
         "memory kept back for other work, on top of the booster's floor")
      ->type_name("BYTES[K|M|G]");
  cmd.add_option_function<std::string>(
         "--max-body-bytes", [&o](const std::string& text) { o.max_body_bytes = parse_bytes("--max-body-bytes", text); },
         "larger request bodies get 413 unread (default: 1 MiB + 64 bytes per context token)")
      ->type_name("BYTES[K|M|G]");
  // Every recursive walk over request JSON is bounded by this depth on an HTTP thread's stack.
  cmd.add_option("--max-json-depth", o.server.max_json_depth, "request JSON nested deeper is a 400")
      ->check(in_range(1, 1024))
      ->capture_default_str();
  cmd.add_option("--max-images", o.server.images.max_images, "images in one request; more is a 400")
      ->check(in_range(0, 1024))
      ->capture_default_str();
  cmd.add_option_function<std::string>(
         "--max-image-bytes",
         [&o](const std::string& text) { o.server.images.max_bytes = size_t(parse_bytes("--max-image-bytes", text)); },
         "bytes of one image (after base64); larger is a 413 (default: 20M)")
      ->type_name("BYTES[K|M|G]");
  cmd.add_option("--otlp-traces-endpoint", o.telemetry.otlp_traces_endpoint,
                 "export request spans over OTLP/HTTP JSON to URL/v1/traces (e.g. http://127.0.0.1:4318)")
      ->type_name("URL");
  cmd.add_option("--step-sample", o.telemetry.step_sample,
                 "measure one decode step in N by kernel group for rocket_step_seconds (0: none)")
      ->check(at_least(0))
      ->capture_default_str();
  cmd.add_option("--drain-timeout", o.drain_timeout,
                 "seconds SIGTERM or SIGINT lets in-flight requests finish before they are cut off with an error")
      ->check(in_range(0, 86400))
      ->capture_default_str();
  cmd.add_option("--force-tokens", o.force_tokens,
                 "TEST-ONLY: forced token sequences that replace sampling for requests whose `user` names one")
      ->check(CLI::ExistingFile);
}

}  // namespace rocket
