// LaunchSteps: one booster's engine as the countdown drives it (launch/launch.h runs them). Each
// engine binary supplies its own (engine/engine_binary.h); the countdown and the server over them are
// the same for every booster.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "boosters/memory_budget.h"
#include "scheduler/batch_engine.h"

namespace rocket {

// Each step returns a line saying what it did (the countdown logs it with the phase's duration) and
// throws Error with the reason when it fails.
struct LaunchSteps {
  // Map and check the plan, admit its memory keeping `reserve_bytes` back for other work.
  std::function<std::string(uint64_t reserve_bytes)> upright;
  std::function<std::string()> fuel;         // weights resident
  std::function<std::string()> static_fire;  // every bucket warm; the plan's golden token, when it has one
  std::function<BatchEngine&()> engine;      // valid after fuel
  std::function<MemoryBudget()> budget;      // what upright measured and admitted the plan against
  int64_t max_context = 0;  // the plan's (engine.h kMaxContext): sizes the request-body limit before upright
};

}  // namespace rocket
