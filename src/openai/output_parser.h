// Splits a chat model's streamed output into what OpenAI's chat API carries separately: reasoning
// (`reasoning_content`), content, and tool calls, for Qwen's output format:
//
//   <think>\n…reasoning…\n</think>\n\n…content…\n<tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call>
//
// Input is the text StreamDecoder yields (always whole UTF-8 characters), in pieces of any size; the
// tags may be split across pieces ("<tool" + "_call>"), so a piece's tail that could begin a tag is
// held until the next piece decides it, and nothing else is held. Tags are ASCII and held text begins
// at '<', so every emitted piece is whole UTF-8 too.
//
// Rules:
//  - <think> opens reasoning only at the start of the turn (before any content or tool call); later it
//    is content. </think> closes it. Options::reasoning_open starts the turn inside reasoning, for
//    templates whose generation prompt already opens <think>. With thinking disabled the template puts
//    an empty think block in the prompt and the output is content throughout: no option is needed.
//  - Inside reasoning, <tool_call> is reasoning text (the model may think about a call).
//  - A <tool_call> block is held whole until </tool_call>, then parsed as {"name": string,
//    "arguments": object (absent = {})}. Valid: ToolCallStart (index, id, name) and one
//    ToolCallArgumentsDelta carrying the whole arguments object as compact JSON in the model's key
//    order. Anything else, or a block the stream ends inside, is returned verbatim as content.
//    NOTE: arguments arrive in one fragment when the block closes, not token by token: a call that
//    was announced cannot be retracted, so a block is only announced once it is known to be valid.
//    OpenAI's stream shape (first delta id + name, then argument fragments) is kept.
//  - Newlines at the edges of segments are layout, not text, and are dropped as the Qwen chat template
//    drops them when it renders a turn back (reasoning_content.strip('\n'), content.lstrip('\n')):
//    leading and trailing '\n' of reasoning, '\n' at the start of content after </think> or
//    </tool_call>, and '\n' right before <tool_call>. A valid block's surroundings are thus dropped;
//    content that ends the stream keeps its trailing newlines.
//  - Options::max_tool_calls bounds the calls of a turn (parallel_tool_calls=false, a named
//    tool_choice): the turn ends with the last one's arguments. Text after it produces no events and
//    complete() turns true, telling the caller to stop generating; the parser is the one place that
//    knows a block was a valid call, outside reasoning.
//
// The XML format (Options::format kXml, Qwen3.5): a block is '<function=NAME>' then parameters
// '<parameter=P>\nVALUE\n</parameter>', then '</function>'. A value keeps its text verbatim (its one
// leading and one trailing newline removed) when the function's schema declares the parameter a
// string, or does not declare it; otherwise (integer, number, boolean, null, object, array) it is
// parsed as JSON, and kept as a string when it does not parse. The arguments object lists the
// parameters in the order the model wrote them. In this format a <tool_call> inside reasoning ends
// the reasoning and is parsed as a call: Qwen3.5 models do call tools from their thinking, and a call
// left in reasoning_content is lost to the client.
//
// Not thread-safe: one per response.
#pragma once

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "openai/openai_request.h"
#include "openai/tool_call_format.h"

namespace rocket {

// Each function's parameters and the JSON types its schema declares for them ("string", "integer",
// ...; a union lists several): what the XML format's values are converted with.
using ParameterTypes = std::map<std::string, std::map<std::string, std::vector<std::string>, std::less<>>, std::less<>>;

// The declared types of every tool's parameters (`parameters.properties.P.type`, a string or an
// array of them; a property with no type is absent).
ParameterTypes parameter_types(const std::vector<Tool>& tools);

struct ReasoningDelta {
  std::string text;
};
struct ContentDelta {
  std::string text;
};
struct ToolCallStart {
  int index;  // 0, 1, … in order of appearance
  std::string id;
  std::string name;
};
struct ToolCallArgumentsDelta {
  int index;
  std::string fragment;  // the fragments of one call concatenate to its arguments' JSON text
};
using OutputEvent = std::variant<ReasoningDelta, ContentDelta, ToolCallStart, ToolCallArgumentsDelta>;

class OutputParser {
 public:
  struct Options {
    bool reasoning_open = false;  // the prompt ends inside <think>: the output starts as reasoning
    bool tool_calls = true;       // parse <tool_call> blocks; false (no tools, tool_choice none) = content
    int max_tool_calls = std::numeric_limits<int>::max();  // >= 1
    ToolCallFormat format = ToolCallFormat::kJson;        // the fuel's (plan.tool_call_format)
    std::shared_ptr<const ParameterTypes> parameters;      // kXml: value conversion; null = all strings
  };

  // `id_rng` draws the tool-call ids ("call_" + 24 alphanumerics).
  OutputParser(Options options, std::mt19937_64 id_rng);

  // Classifies `text`; returns the events it completes (adjacent deltas of one kind merged).
  // REQUIRES: finish() not called.
  std::vector<OutputEvent> push(std::string_view text);

  // Feeds text that the prompt already holds at the start of the turn (the opening of a call that
  // tool_choice forces: forced_opening() in openai/prompt_builder.h) so that the parser is in the
  // state it leaves; its text produces no events. A tool-call block it opens is announced when the
  // output closes it.
  void prime(std::string_view text);

  // Ends the output: releases held text and returns an unterminated tool-call block as content.
  std::vector<OutputEvent> finish();

  // Inside the reasoning block (after <think>, before </think>).
  bool reasoning() const { return state_ == State::kReasoning; }
  // Valid tool calls so far; finish_reason is "tool_calls" when this is non-zero.
  int tool_calls() const { return tool_calls_; }
  // The turn has its max_tool_calls calls: further output is dropped, and need not be generated.
  bool complete() const { return tool_calls_ == options_.max_tool_calls; }

 private:
  enum class State { kContent, kReasoning, kToolCall };

  std::vector<std::string_view> active_tags() const;
  void process(bool final);
  void text(std::string_view s);
  void tag(std::string_view t);
  void segment_text(std::string_view s, bool reasoning);
  void close_tool_call();
  // The arguments of a valid block in the options' format, with its function's name; nullopt when
  // the block is not a valid call.
  std::optional<std::pair<std::string, std::string>> parse_json_call() const;
  std::optional<std::pair<std::string, std::string>> parse_xml_call() const;
  void emit(OutputEvent event);

  Options options_;
  std::mt19937_64 rng_;
  State state_ = State::kContent;
  std::string pending_;           // unclassified tail: a possible partial tag
  std::string block_;             // body of the open <tool_call> block
  size_t block_newlines_ = 0;     // newlines dropped before it, given back if it is not a valid call
  bool think_allowed_ = true;     // nothing but reasoning so far
  bool segment_start_ = true;     // drop '\n' until the segment's first other character
  size_t held_newlines_ = 0;      // trailing '\n' of the segment, emitted when more text follows
  int tool_calls_ = 0;
  bool finished_ = false;
  std::vector<OutputEvent> events_;
};

}  // namespace rocket
