// How a fuel's chat template writes an assistant's tool call inside <tool_call> ... </tool_call>, which
// is how the model was trained to call tools and so how its output must be parsed:
//   kJson (Qwen3):           {"name": "get_weather", "arguments": {"city": "Paris"}}
//   kXml  (Qwen3.5, Qwen3.6): <function=get_weather>
//                             <parameter=city>
//                             Paris
//                             </parameter>
//                             </function>
// `rocket build` reads it from the template and records it in the plan; the prompt builder (forced
// openings) and the output parser follow it.
#pragma once

#include <optional>
#include <string_view>

namespace rocket {

enum class ToolCallFormat { kJson, kXml };

// A template that writes `<function=` blocks gets kXml; any other gets kJson.
ToolCallFormat tool_call_format_of(std::string_view chat_template_source);

const char* tool_call_format_name(ToolCallFormat f);                  // "json" | "xml"
std::optional<ToolCallFormat> parse_tool_call_format(std::string_view name);

}  // namespace rocket
