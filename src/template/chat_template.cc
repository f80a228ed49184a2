#include "template/chat_template.h"

#include "core/error.h"
#include "template/jinja_ast.h"
#include "template/jinja_error.h"
#include "template/jinja_parser.h"
#include "template/jinja_render.h"

namespace rocket {

namespace {

using nlohmann::ordered_json;

// Whether `e` names some `content`: content, x.content, x["content"], or any of those filtered.
bool is_content(const jinja::Expr& e) {
  switch (e.kind) {
    case jinja::ExprKind::kName:
    case jinja::ExprKind::kGetattr:
      return e.name == "content";
    case jinja::ExprKind::kGetitem:
      return e.args[1]->kind == jinja::ExprKind::kConst && e.args[1]->value.is_string() &&
             e.args[1]->value.as_string() == "content";
    case jinja::ExprKind::kFilter:
      return is_content(*e.args[0]);
    default:
      return false;
  }
}

bool loops_over_content(const jinja::Body& body) {
  for (const jinja::Stmt& s : body) {
    if (s.kind == jinja::StmtKind::kFor && is_content(*s.expr)) return true;
    for (const jinja::Body& inner : s.bodies) {
      if (loops_over_content(inner)) return true;
    }
  }
  return false;
}

// Content as a string-only template expects it: parts' texts joined with "\n", null as "".
ordered_json flatten_content(const ordered_json& content, size_t message) {
  if (content.is_null()) return "";
  if (!content.is_array()) return content;
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const ordered_json& part = content[i];
    const auto type = part.is_object() ? part.find("type") : part.end();
    if (type == part.end() || *type != "text") {
      fail("messages[{}].content[{}]: only text content parts can be rendered into a prompt (got {})", message, i,
           type == part.end() ? part.dump() : type->dump());
    }
    const auto t = part.find("text");
    if (t == part.end() || !t->is_string()) fail("messages[{}].content[{}]: a text part needs a string 'text'", message, i);
    if (i) text += "\n";
    text += t->get<std::string>();
  }
  return text;
}

}  // namespace

ChatTemplate::ChatTemplate(std::shared_ptr<const jinja::Template> tpl, bool takes_content_parts)
    : template_(std::move(tpl)), takes_content_parts_(takes_content_parts) {}

ChatTemplate ChatTemplate::compile(const std::string& source) {
  auto tpl = std::make_shared<jinja::Template>(jinja::parse_template(source));
  const bool parts = loops_over_content(tpl->body);
  return ChatTemplate(std::move(tpl), parts);
}

std::string ChatTemplate::render(const ordered_json& context) const {
  if (!context.is_object()) fail("chat template context must be a JSON object, got {}", context.type_name());
  jinja::Object variables;
  try {
    for (const auto& [key, value] : context.items()) {
      if (key == "messages" && !takes_content_parts_ && value.is_array()) {
        ordered_json messages = value;
        for (size_t i = 0; i < messages.size(); ++i) {
          auto content = messages[i].is_object() ? messages[i].find("content") : messages[i].end();
          if (content != messages[i].end()) *content = flatten_content(*content, i);
        }
        variables.emplace_back(key, jinja::from_json(messages));
      } else {
        variables.emplace_back(key, jinja::from_json(value));
      }
    }
  } catch (const jinja::RenderError& e) {
    fail("chat template context: {}", e.what());
  }
  return jinja::render(*template_, variables);
}

}  // namespace rocket
