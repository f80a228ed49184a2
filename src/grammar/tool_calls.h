// Tool calls under a grammar: the automaton of an answer made of tool calls in the fuel's tool-call
// format (openai/tool_call_format.h), each call naming one of the tools literally and writing
// arguments that follow that tool's `parameters` schema, so that the output parser
// (openai/output_parser.cc) reads back arguments that parse and validate.
//
// The layouts are the chat templates' own (what the model was trained to write):
//   kJson: <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
//          ARGS is JSON under json_schema.h's compiler (any JSON object when not validated).
//   kXml:  <tool_call>\n<function=NAME>\n(<parameter=P>\nVALUE\n</parameter>\n)*</function>\n</tool_call>
//          VALUE is encoded as the parser decodes it: a parameter whose schema's `type` is absent or
//          includes "string" is read as raw text (any text without "</parameter>" or "</tool_call>",
//          where the parser would end it, or one of its
//          string enum/const values); any other as JSON under the property's schema. Declared
//          parameters are written in the schema's order, required ones always; none beyond those
//          declared (a tool with no declared properties and not additionalProperties false takes
//          any parameters, raw text each).
// Calls follow each other with an optional newline; after the last one the answer ends (eos).
//
// The answer (ToolCallsSpec::answer):
//  - kCalls: one call (or more when parallel) and nothing else: tool_choice "required" (every tool)
//    or a named function (that tool alone).
//  - kTextOrCalls: tool_choice "auto" with strict tools. Free text (anything without "<tool_call>"),
//    then optionally call(s): the free text is unconstrained until "<tool_call>" is written, and the
//    call from there on is under the grammar. Tools with `validate` false take any arguments (any
//    JSON object, or any parameters). With a response_format (content_json) the free text is
//    instead the format's JSON: the answer is either the structured output or the calls.
//
// Refused (SchemaError, path "$..." within the tool's parameters, message naming the tool): a schema
// outside json_schema.h's subset; parameters that are not an object schema; in the XML format, a
// raw-text parameter with minLength/maxLength/pattern/format, anyOf or $ref (the parser reads it as
// text, which such a schema need not accept), or an enum of which no value is writable as raw text.
//
// The parser ends a block at its first "</tool_call>" (and an XML parameter at its first
// "</parameter>"), even inside a JSON string, so JSON strings in arguments never hold a raw "</"
// (the model may write "<\/"). Known gap: strings under a `pattern`, and enum/const values, are
// written as the schema says, and may hold a closing tag if the schema's author put one there.
//
// Thread safety: compile_tool_calls is pure.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/automaton.h"

namespace rocket::grammar {

enum class ToolSyntax { kJson, kXml };

struct ToolSignature {
  std::string name;                   // [a-zA-Z0-9_-], as the request parser checks
  nlohmann::ordered_json parameters;  // a JSON Schema object; null: any arguments
  bool validate = true;               // false: any arguments (auto mode's non-strict tools)
};

struct ToolCallsSpec {
  enum class Answer { kCalls, kTextOrCalls };
  ToolSyntax syntax = ToolSyntax::kJson;
  Answer answer = Answer::kCalls;
  std::vector<ToolSignature> tools;  // non-empty
  bool parallel = true;              // more than one call
  // kTextOrCalls with a response_format: the answer is JSON under `content_schema` (null: any JSON
  // object) instead of free text, or the calls.
  bool content_json = false;
  nlohmann::ordered_json content_schema;

  // The GrammarCache key: every field, with the schemas' texts (key order kept: it decides the
  // output's).
  std::string key() const;
};

// Throws SchemaError (see above).
std::shared_ptr<const Automaton> compile_tool_calls(const ToolCallsSpec& spec);

}  // namespace rocket::grammar
