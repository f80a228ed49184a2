#include "front/admission.h"

#include <fmt/format.h>

namespace rocket {

Admission::Admission(Handshake plan, std::string plan_device, std::string plan_dir)
    : plan_(std::move(plan)), plan_device_(std::move(plan_device)), plan_dir_(std::move(plan_dir)) {}

std::string Admission::admit(int index, const Handshake& h) {
  const std::string me = fmt::format("on replica {}", index);
  if (const std::string d = plan_difference(plan_, h, plan_device_, {me, "in the plan of " + plan_dir_}); !d.empty())
    return "differs from the front's plan: " + d;
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_) {
    first_ = h;
    first_index_ = index;
    return "";
  }
  if (const std::string d = peer_difference(*first_, h, {me, fmt::format("on replica {}", first_index_)}); !d.empty())
    return fmt::format("differs from replica {}: {}", first_index_, d);
  return "";
}

}  // namespace rocket
