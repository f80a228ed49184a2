// A profiling corpus: the text `rocket profile` runs a fuel over to record its co-activation profile
// (fuel/coactivation.h). The format, one entry a line (UTF-8; blank lines skipped):
//   - a line whose first non-blank character is '{' is a JSON object, an OpenAI request body: with
//     "messages", a chat completion, rendered through the fuel's chat template with its generation
//     prompt exactly as POST /v1/chat/completions renders it (tools, chat_template_kwargs and all);
//     with "prompt" (text or token ids), a completion, tokenised as POST /v1/completions does.
//     "model" may be left out; sampling fields are read but the profile decodes greedily, and
//     max_tokens is the profile's --max-tokens;
//   - any other line is plain text: a completion prompt (the line, without its line break).
// So a log of served requests, one body a line, is a corpus, and so is a text file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "openai/openai_request.h"

namespace rocket {

struct CorpusEntry {
  int line = 0;                 // 1-based, for messages
  CompletionRequest request;
};

struct Corpus {
  std::string path;
  std::string fnv64;            // of the file's bytes, 16 hex digits
  std::vector<CorpusEntry> entries;
};

// Reads and parses every entry; Error names the file and line of a malformed one (bad JSON, neither
// or both of messages and prompt, a field the API would refuse). `max_tokens` >= 1 is given to every
// request (the API's minimum; the profile decodes `max_tokens` it was asked for, 0 included).
Corpus read_corpus(const std::string& path, int64_t max_tokens);

}  // namespace rocket
