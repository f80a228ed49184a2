#include "engine/profile_options.h"

namespace rocket {

void add_profile_options(CLI::App& cmd, ProfileOptions& o) {
  cmd.add_option("--corpus", o.corpus,
                 "the corpus: one entry a line, an OpenAI request body ({\"messages\": [...]} or {\"prompt\": ...}) or "
                 "plain text (a completion prompt)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd.add_option("--out", o.out, "the co-activation profile to write (JSON)")->capture_default_str();
  cmd.add_option("--max-tokens", o.max_tokens, "greedy tokens decoded after each prompt, their routing counted too")
      ->check(at_least(0))
      ->capture_default_str();
}

}  // namespace rocket
