// The answer of POST /v1/responses, built from the output parser's events: the `response` object and
// the stream's events, field for field as OpenAI writes them. One state machine serves both forms, so
// a whole response is exactly the last snapshot of the stream the same output would have made.
//
// The output items, in the order the model produced them:
//   reasoning      {id "rs_…", type, summary: [], content: [{type: "reasoning_text", text}],
//                   encrypted_content (when the request included it: the reasoning sealed, for a
//                   stateless client to send back next turn)}
//   message        {id "msg_…", type, status, role: "assistant", content: [{type: "output_text", text,
//                   annotations: [], logprobs: []}]}
//   function_call  {id "fc_…", type, status, call_id, name, arguments, namespace (a tool of a
//                   namespace tool)}
// A stream is, with a sequence_number on every event:
//   response.created, response.in_progress                         (status in_progress, no output)
//   per item: response.output_item.added, then
//     reasoning:  response.content_part.added, response.reasoning_text.delta …,
//                 response.reasoning_text.done, response.content_part.done
//     message:    response.content_part.added, response.output_text.delta …,
//                 response.output_text.done, response.content_part.done
//     call:       response.function_call_arguments.delta …, response.function_call_arguments.done
//   then response.output_item.done
//   response.completed, or response.incomplete (incomplete_details.reason "max_output_tokens")
// Each is sent as `event: TYPE` + `data: JSON` (sse_event); there is no [DONE].
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "openai/openai_response.h"
#include "openai/output_parser.h"
#include "openai/protocol_error.h"

namespace rocket {

struct ResponsesStreamOptions {
  bool encrypted_reasoning = false;  // ResponsesRequest::encrypted_reasoning
  std::map<std::string, std::string, std::less<>> namespace_of;  // ResponsesRequest::namespace_of
};

class ResponsesStream {
 public:
  using Options = ResponsesStreamOptions;
  // `echo`: ResponsesRequest::echo. `rng` draws the item ids.
  ResponsesStream(std::string id, int64_t created_at, std::string model, nlohmann::ordered_json echo,
                  std::mt19937_64 rng, Options options = {});

  // response.created and response.in_progress.
  std::vector<nlohmann::ordered_json> start();
  // The events one parser event makes: the open item closed and a new one opened when its kind
  // changes, then the delta.
  std::vector<nlohmann::ordered_json> on(const OutputEvent& event);
  // Closes the open item and ends the response: response.completed, or response.incomplete when the
  // output was cut at max_output_tokens (`finish` kLength). `reasoning_tokens`: of usage's completion tokens.
  std::vector<nlohmann::ordered_json> finish(FinishReason finish, const Usage& usage, int64_t reasoning_tokens);
  // The `error` event of a response that failed in the engine.
  nlohmann::ordered_json error(const ProtocolError& e);

  // The response object as of the last call (after finish(): the whole response).
  const nlohmann::ordered_json& response() const { return response_; }

 private:
  enum class Open { kNone, kReasoning, kMessage, kCall };

  nlohmann::ordered_json event(const char* type);
  void open(Open kind, std::vector<nlohmann::ordered_json>& out, const OutputEvent& first);
  void close(std::vector<nlohmann::ordered_json>& out, const char* status = "completed");
  std::string item_id(const char* prefix);

  Options options_;
  nlohmann::ordered_json response_;
  std::mt19937_64 rng_;
  int64_t sequence_ = 0;
  Open open_ = Open::kNone;
  nlohmann::ordered_json item_;  // the open item, as output_item.done will carry it
};

}  // namespace rocket
