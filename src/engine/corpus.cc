#include "engine/corpus.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/hash.h"
#include "openai/protocol_error.h"

namespace rocket {

using Json = nlohmann::ordered_json;

Corpus read_corpus(const std::string& path, int64_t max_tokens) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot open the corpus", path);
  std::stringstream all;
  all << f.rdbuf();
  const std::string text = all.str();
  Corpus c;
  c.path = path;
  Fnv64 h;
  h.update(text);
  c.fnv64 = fmt::format("{:016x}", h.digest());
  std::istringstream lines(text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    try {
      Json body;
      bool chat = false;
      if (line[first] == '{') {
        body = parse_json_body(line);
        const bool messages = body.contains("messages"), prompt = body.contains("prompt");
        if (messages == prompt)
          fail("{}:{}: a JSON entry holds \"messages\" (chat) or \"prompt\" (completion), exactly one", path, n);
        chat = messages;
        body.erase("max_tokens");
        body.erase("max_completion_tokens");
      } else {
        body = Json{{"prompt", line}};
      }
      if (!body.contains("model")) body["model"] = "profile";
      body["max_tokens"] = std::max<int64_t>(1, max_tokens);
      c.entries.push_back({n, chat ? parse_chat_request(body) : parse_completion_request(body)});
    } catch (const ProtocolError& e) {
      fail("{}:{}: {}{}", path, n, e.what(), e.param().empty() ? "" : " (" + e.param() + ")");
    }
  }
  if (c.entries.empty()) fail("{}: the corpus holds no entry", path);
  return c;
}

}  // namespace rocket
