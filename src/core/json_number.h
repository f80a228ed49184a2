#pragma once
// Exact reading of JSON numbers. nlohmann converts a number to any arithmetic type with a bare
// static_cast: 1e47 read into a uint64_t is undefined behaviour (the plan fuzzer found it), 4294967297
// read into an int silently becomes 1, and -1 read into a size becomes 18446744073709551615. The files
// and replies Rocket reads (plans, chemistries, co-activation profiles, handshakes, replica reports)
// convert their numbers through number() instead, which throws nlohmann's own type_error for a value
// the target cannot hold exactly, so the callers' existing "malformed ..." handling names it.
//
//   p.max_streams = number(j.at("max_streams"));              // deduces int from the target
//   auto order = numbers<std::vector<int>>(j.at("order"));    // containers, nested to any depth

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace rocket {

namespace json_number_detail {

template <class Json>
[[noreturn]] void refuse(const Json& v, const char* wanted) {
  throw nlohmann::json::type_error::create(302, std::string("expected ") + wanted + ", found " + v.dump(), nullptr);
}

template <class T>
constexpr const char* integer_name() {
  if constexpr (std::is_same_v<T, bool>) return "a boolean";
  else if constexpr (std::is_unsigned_v<T>) return sizeof(T) == 8 ? "a non-negative 64-bit integer" : "a non-negative 32-bit integer";
  else return sizeof(T) == 8 ? "a 64-bit integer" : sizeof(T) == 4 ? "a 32-bit integer" : "a small integer";
}

}  // namespace json_number_detail

// One number (or boolean) read exactly into T, from a nlohmann::json or an ordered_json.
template <class T, class Json>
T json_number(const Json& v) {
  using namespace json_number_detail;
  static_assert(std::is_arithmetic_v<T>);
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) refuse(v, "a boolean");
    return v.template get<bool>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) refuse(v, "a number");
    const double x = v.template get<double>();
    if (!std::isfinite(x) || std::abs(x) > double(std::numeric_limits<T>::max())) refuse(v, "a finite number in range");
    return T(x);
  } else {
    // A float (even 2.0) is not an integer any writer of ours produced.
    if (v.is_number_unsigned()) {
      const uint64_t u = v.template get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<T>::max())) refuse(v, integer_name<T>());
      return T(u);
    }
    if (v.is_number_integer()) {
      const int64_t i = v.template get<int64_t>();
      // A parsed non-negative literal is unsigned, but a json built in code may hold one as signed.
      if constexpr (std::is_unsigned_v<T>) {
        if (i < 0 || uint64_t(i) > uint64_t(std::numeric_limits<T>::max())) refuse(v, integer_name<T>());
        return T(i);
      } else {
        if (i < int64_t(std::numeric_limits<T>::min()) || i > int64_t(std::numeric_limits<T>::max()))
          refuse(v, integer_name<T>());
        return T(i);
      }
    }
    refuse(v, integer_name<T>());
  }
}

// A container of numbers (std::vector, nested), each element read exactly.
template <class T, class Json>
T numbers(const Json& v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return json_number<T>(v);
  } else {
    if (!v.is_array()) json_number_detail::refuse(v, "an array");
    T out;
    out.reserve(v.size());
    for (const auto& e : v) out.push_back(numbers<typename T::value_type>(e));
    return out;
  }
}

// The target's type chosen by the assignment or initialisation it appears in.
template <class Json>
struct JsonNumber {
  const Json& v;
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  operator T() const {
    return json_number<T>(v);
  }
};
template <class Json>
JsonNumber<Json> number(const Json& v) {
  return {v};
}

}  // namespace rocket
