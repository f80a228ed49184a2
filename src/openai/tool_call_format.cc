#include "openai/tool_call_format.h"

namespace rocket {

ToolCallFormat tool_call_format_of(std::string_view chat_template_source) {
  return chat_template_source.find("<function=") != std::string_view::npos ? ToolCallFormat::kXml : ToolCallFormat::kJson;
}

const char* tool_call_format_name(ToolCallFormat f) { return f == ToolCallFormat::kXml ? "xml" : "json"; }

std::optional<ToolCallFormat> parse_tool_call_format(std::string_view name) {
  if (name == "json") return ToolCallFormat::kJson;
  if (name == "xml") return ToolCallFormat::kXml;
  return std::nullopt;
}

}  // namespace rocket
