// Filters, tests, methods and global functions of the chat-template engine.
//
// The parser asks is_filter/is_test/is_method/is_global_function about every name a template uses, so
// a template needing anything else is refused when it is compiled, never when a request renders it.
// Semantics are Jinja2's (and, for `tojson` and `raise_exception`, HF transformers' own versions);
// arguments bind by position or keyword with Python's rules.
//
// Supported:
//   filters  abs capitalize count d default first float indent int items join last length list lower
//            map reject rejectattr replace reverse safe select selectattr string title tojson trim upper
//   tests    boolean callable defined divisibleby eq equalto even false float ge gt in integer iterable
//            le lower lt mapping ne none number odd sameas sequence string true undefined upper
//            == != < <= > >= (the comparison tests take one argument)
//   methods  of str: capitalize count endswith find join lower lstrip replace rsplit rstrip split
//            startswith strip title upper; of dict: get items keys values; of list and tuple: count
//   globals  dict namespace raise_exception range strftime_now
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "template/jinja_error.h"
#include "template/jinja_value.h"

namespace rocket::jinja {

using Kwargs = std::vector<std::pair<std::string, Value>>;

bool is_filter(std::string_view name);
bool is_test(std::string_view name);
// How many arguments the test takes after the tested value (0 or 1).
size_t test_arity(std::string_view name);
bool is_method(std::string_view name);
bool is_global_function(std::string_view name);

// REQUIRES: the name passed the matching is_*() check (the parser guarantees it).
Value apply_filter(std::string_view name, const Value& operand, std::span<const Value> args, const Kwargs& kwargs);
bool apply_test(std::string_view name, const Value& operand, std::span<const Value> args);
Value call_method(const Value& receiver, std::string_view name, std::span<const Value> args, const Kwargs& kwargs);
Value call_global(std::string_view name, std::span<const Value> args, const Kwargs& kwargs);

// What raise_exception() throws: the template's own message for the user.
class TemplateException : public RenderError {
 public:
  explicit TemplateException(const std::string& what) : RenderError(what) {}
};

}  // namespace rocket::jinja
