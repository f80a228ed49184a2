// One field of a checkpoint's config.json, read exactly (core/json_number.h) as T, or `fallback` when
// absent or null; Error naming `where` (the file, and the object within it) and the field otherwise.
#pragma once

#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_number.h"

namespace rocket {

template <typename T>
T config_field(const nlohmann::json& j, const char* key, const std::string& where, const T* fallback = nullptr) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    fail("{}: missing field '{}'", where, key);
  }
  try {
    if constexpr (std::is_arithmetic_v<T>) return json_number<T>(*it);
    else return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("{}: field '{}' has the wrong type ({})", where, key, it->dump());
  }
}

}  // namespace rocket
