#include "engine/generate_options.h"

namespace rocket {

void add_generate_options(CLI::App& cmd, GenerateOptions& o) {
  cmd.add_option("--prompt", o.prompt, "the text to continue")->required();
  cmd.add_option("--max-tokens", o.max_tokens, "tokens to generate at most")->check(at_least(1))->capture_default_str();
  cmd.add_option("--temperature", o.temperature, "0: greedy")->check(at_least(0))->capture_default_str();
  cmd.add_option("--top-p", o.top_p, "keep the most likely tokens holding this much mass")
      ->check(in_range(0, 1))
      ->capture_default_str();
  cmd.add_option("--top-k", o.top_k, "keep the k most likely tokens (0: all)")->check(at_least(0))->capture_default_str();
  cmd.add_option("--seed", o.seed, "the draw's seed")->capture_default_str();
}

}  // namespace rocket
