// Matcher: one generation's position in a CompiledGrammar. It gives the mask of tokens that may come
// next (every token whose bytes keep the output a prefix of some text the grammar accepts, and eos
// exactly when the output so far is complete) and advances over the token the sampler picked.
//
// A mask is `accepted` of each parse state's node (MaskCache) ORed together, plus the node's
// uncertain trie subtrees walked with this parse's real stack. It is a function of the parse state
// alone, and states recur (every character of a long string leaves the same one), so the last few
// states' masks are kept and copied.
//
// Thread safety: none (one per generation, driven by the engine loop).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "grammar/compiled_grammar.h"
#include "grammar/parse_stack.h"

namespace rocket::grammar {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);
  Matcher(const Matcher&) = delete;
  Matcher& operator=(const Matcher&) = delete;

  // The parser work (Stepper::work) one mask may take. A schema with thousands of alternatives at one
  // point (3,000 optional properties: ~0.4 s a token; an enum of 100,000 strings, now refused at
  // compile, ~0.6 s) would otherwise stall every stream of the engine loop, which computes masks, that
  // long every token. A unit is ~25 ns on a 2.6 GHz Xeon core, so the budget is ~0.25 s; the largest
  // mask of the agent schemas of bench/grammar_bench.cc takes 4.7M (a cold first mask, which fills the
  // mask cache's root node).
  static constexpr uint64_t kMaskWork = 10'000'000;
  static constexpr int kTooComplex = -1;

  // Writes the allowed tokens into `mask` (vocabulary().trie.mask_words() words, bit t of word t/32).
  // Returns how many are allowed; 0 means no token of the vocabulary can continue the output, and
  // kTooComplex that the mask would take more than `budget` (the mask is then incomplete). A caller
  // that can do without the mask (a drafted row) asks less than kMaskWork.
  int fill_mask(std::span<uint32_t> mask, uint64_t budget = kMaskWork);
  // The work the last fill_mask took (0 when its memo answered).
  uint64_t last_work() const { return last_work_; }
  // Takes a token: false (nothing changes) when the grammar does not allow it. Eos is allowed when
  // accepting(), and ends the matcher (done()).
  bool advance(int32_t token);
  // Takes raw bytes (tests; the grammar's own view of text); false and unchanged when not allowed.
  bool advance_bytes(std::string_view bytes);
  // The output so far is a complete text of the grammar.
  bool accepting() const { return state_.accept; }
  bool done() const { return done_; }
  // Bytes taken so far (for error messages).
  size_t position() const { return position_; }

  const CompiledGrammar& grammar() const { return *grammar_; }

  // Where the parse stands, to come back to: speculative decoding steps the matcher through drafts
  // to mask each verified row, then returns to where the real output is. The frame pool only grows,
  // so a checkpoint's frames stay valid whatever is stepped after it.
  struct Checkpoint {
    StackSet state;
    size_t position = 0;
    bool done = false;
  };
  Checkpoint checkpoint() const { return {state_, position_, done_}; }
  void restore(Checkpoint c) {
    state_ = std::move(c.state);
    position_ = c.position;
    done_ = c.done;
  }

 private:
  // Adds the tokens of trie subtree `root` that `top` (a frame of this matcher's pool) can take.
  // False once the mask's work passed budget_.
  bool walk_uncertain(int32_t top, int32_t root, std::span<uint32_t> mask, uint64_t& work);

  std::shared_ptr<const CompiledGrammar> grammar_;
  StackPool pool_;
  Stepper stepper_;
  StackSet state_, next_;
  std::vector<StackSet> walk_;  // walk_uncertain's states by trie depth
  struct Memo {
    std::vector<int32_t> tops;
    bool accept = false;
    std::vector<uint32_t> mask;  // empty: unused
    int count = 0;
  };
  static constexpr size_t kMemos = 4;
  std::array<Memo, kMemos> memo_;
  size_t memo_next_ = 0;  // the slot the next new state takes (round robin)
  size_t position_ = 0;
  uint64_t last_work_ = 0;
  uint64_t budget_ = kMaskWork;  // fill_mask's, for walk_uncertain
  bool done_ = false;
};

}  // namespace rocket::grammar
