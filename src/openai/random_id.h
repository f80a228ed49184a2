// Opaque ids for responses and tool calls ("chatcmpl-…", "call_…"), drawn from a generator the caller
// seeds, so that a test (or a seeded request) gets the same ids every run.
#pragma once

#include <cstddef>
#include <random>
#include <string>
#include <string_view>

namespace rocket {

// `prefix` followed by `length` characters from [A-Za-z0-9].
std::string random_id(std::string_view prefix, size_t length, std::mt19937_64& rng);

// OpenAI's tool-call id form: "call_" and 24 alphanumerics.
inline std::string tool_call_id(std::mt19937_64& rng) { return random_id("call_", 24, rng); }

}  // namespace rocket
