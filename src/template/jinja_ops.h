// The operators of the chat-template language, with the semantics of Jinja2's immutable sandbox (the
// environment HF transformers renders with) on Python values:
//   - `a.b` tries the attribute first (so `d.items` is dict's method even when d has a key "items"),
//     then the key; `a[b]` tries the key first, then the attribute. A miss is Undefined, not an error;
//     any use of Undefined beyond printing (""), truth (false), iteration (empty), length (0), `~`,
//     `==` and `is` tests is an error.
//   - arithmetic follows Python: no str + int, `/` always a float, `//` and `%` floor.
// All failures are RenderErrors worded as Python would word them.
#pragma once

#include <string_view>
#include <vector>

#include "template/jinja_value.h"

namespace rocket::jinja {

Value get_attr(const Value& obj, std::string_view name);
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step]; Undefined bounds are absent ones.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// op is one of + - * / // % ** ~
Value binary_op(std::string_view op, const Value& a, const Value& b);
Value negate(const Value& a);
// op is one of == != < <= > >= in, not in
bool compare_op(std::string_view op, const Value& a, const Value& b);
// Python's `item in container`.
bool contains(const Value& container, const Value& item);

// len(); Undefined has length 0.
size_t py_len(const Value& v);
// iter(): list and tuple items, dict keys, string characters; Undefined is empty.
std::vector<Value> iterate(const Value& v);

// The RenderError for using Undefined where a value is needed.
[[noreturn]] void undefined_error(const Value& v);

}  // namespace rocket::jinja
