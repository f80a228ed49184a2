// Expert placement: where each routed expert of a layer sits, from a co-activation profile
// (fuel/coactivation.h). Two decisions, both per MoE layer, both pure functions of the profile:
//
//  - the order of the experts' units in the blob (one booster, or within one booster of a split
//    rocket): frequently co-activated experts adjacent, so the experts a token reads together are
//    neighbours in memory (one contiguous read more often, and L2 / TLB locality);
//  - for the split arrangement, which booster holds each expert: every booster the same number of
//    experts (the same memory), the routed load balanced, co-activated experts on one booster so that
//    a token visits fewer boosters (fewer rows on the fabric).
//
// Placement is a performance property only: the plan records it and the engine maps the router's
// expert ids to units through it, so any placement decodes the same tokens.
#pragma once

#include <vector>

#include "fuel/coactivation.h"
#include "plan/plan.h"

namespace rocket {

// NOTE: a step waits for its slowest booster; letting a booster's routed load exceed the mean by
// 10% costs at most 10% of the MoE time and buys keeping co-activated experts together.
constexpr double kLoadSlack = 0.10;

// The one-booster order of `layer`'s experts: order[u] = the expert at unit u. The rule:
//   unit 0 holds the most frequent expert;
//   each next unit holds, of the experts not yet placed, the one most co-activated with the expert
//   placed last; ties go to the more frequent, then to the lower id.
// So a chain follows strong pairs, and where the last expert co-activates with none left, the most
// frequent left starts the next chain. A profile with no tokens gives the identity.
std::vector<int> coactivation_order(const CoactivationProfile& profile, int layer);

// The split arrangement's experts of `layer` over `boosters` boosters: result[b] = the experts booster
// b holds, in unit order (its units follow booster b-1's, so each booster holds one contiguous range
// of units). REQUIRES: experts % boosters == 0. The rule, with capacity experts / boosters each:
//   experts are taken in descending frequency (ties: lower id); load(b) = the frequencies placed on
//   b, bound = (1 + kLoadSlack) × the total / boosters;
//   each goes to the booster with room that it co-activates with most (the sum of its co-activation
//   counts with the experts already there), among those whose load stays within the bound; ties go
//   to the lower load, then to the lower index; when no booster with room stays within the bound, to
//   the one with room and the lowest load (then the lower index);
//   within a booster, experts follow coactivation_order.
// Without a profile (null), booster b holds experts [b·E/N, (b+1)·E/N) in id order: balanced by
// count, the identity order.
std::vector<std::vector<int>> place_experts(const CoactivationProfile* profile, int layer, int experts, int boosters);

// The unit of every expert from an order (inverse permutation): units[order[u]] = u.
std::vector<int> units_of_order(const std::vector<int>& order);

// A split plan's boosters.residency (what one booster holds: the arena less the other boosters'
// experts) and boosters.exchange, from its memory map. REQUIRES: plan.boosters is split, with its
// placement, and the memory map lays the experts out in its expert order.
void plan_split(Plan& plan);

}  // namespace rocket
