#include "boosters/handshake.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/align.h"
#include "core/error.h"
#include "core/json_number.h"
#include "fuel/coactivation.h"

namespace rocket {

using Json = nlohmann::ordered_json;

Json Handshake::to_json() const {
  return Json{{"rocket_handshake_version", kHandshakeVersion},
              {"chemistry", chemistry},
              {"fuel_fingerprint", fuel_fingerprint},
              {"booster", booster},
              {"boosters", boosters},
              {"arrangement", arrangement},
              {"alignment", alignment},
              {"kv_page_tokens", kv_page_tokens},
              {"kv_page_bytes", kv_page_bytes},
              {"max_context", max_context},
              {"max_streams", max_streams},
              {"prefill_chunk", prefill_chunk},
              {"plan_fingerprint", plan_fingerprint},
              {"device_name", device_name},
              {"device_count", device_count},
              {"nccl_version", nccl_version}};
}

Handshake Handshake::from_json(const nlohmann::json& j) {
  try {
    if (const int version = number(j.at("rocket_handshake_version")); version != kHandshakeVersion)
      fail("handshake version {} (this front speaks {})", version, kHandshakeVersion);
    return Handshake{j.at("chemistry"),
                     j.at("fuel_fingerprint"),
                     j.at("booster"),
                     number(j.at("boosters")),
                     j.at("arrangement"),
                     number(j.at("alignment")),
                     number(j.at("kv_page_tokens")),
                     number(j.at("kv_page_bytes")),
                     number(j.at("max_context")),
                     number(j.at("max_streams")),
                     number(j.at("prefill_chunk")),
                     j.at("plan_fingerprint"),
                     j.at("device_name"),
                     number(j.at("device_count")),
                     j.at("nccl_version")};
  } catch (const nlohmann::json::exception& e) {
    fail("malformed handshake: {}", e.what());
  }
}

std::string blob_fuel_fingerprint(const Plan& plan, const std::filesystem::path& blob_path) {
  struct File {
    int fd;
    ~File() {
      if (fd >= 0) ::close(fd);
    }
  } f{::open(blob_path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) fail("{}: cannot open: {}", blob_path.string(), std::strerror(errno));
  std::vector<uint8_t> bytes, by_id;
  return fuel_fingerprint(plan.chemistry, [&](const std::string& name) {
    const PlanTensor& t = plan.tensor(name);
    bytes.resize(size_t(t.bytes));
    for (uint64_t done = 0; done < t.bytes;) {
      const ssize_t n = ::pread(f.fd, bytes.data() + done, size_t(t.bytes - done), off_t(t.offset + done));
      if (n <= 0) fail("{}: reading {} failed: {}", blob_path.string(), name, n == 0 ? "end of file" : std::strerror(errno));
      done += uint64_t(n);
    }
    if (!plan.router_in_unit_order()) return std::span<const uint8_t>(bytes);
    int l = 0;
    while (l < plan.chemistry.layers && Plan::router_name(l) != name) ++l;
    CHECK(l < plan.chemistry.layers, "fuel_fingerprint reads routers only");
    // The checkpoint's row order again: the fingerprint names the fuel, not the blob's order.
    const int E = plan.chemistry.experts;
    const uint64_t row = t.bytes / uint64_t(E);
    by_id.resize(bytes.size());
    for (int e = 0; e < E; ++e)
      std::memcpy(by_id.data() + uint64_t(e) * row, bytes.data() + uint64_t(plan.expert_unit(l, e)) * row, row);
    return std::span<const uint8_t>(by_id);
  });
}

std::string linked_nccl_version() { return "none"; }

Handshake handshake_of(const Plan& plan, const std::filesystem::path& engine_dir, const Topology& machine) {
  return Handshake{.chemistry = plan.fingerprint,
                   .fuel_fingerprint = blob_fuel_fingerprint(plan, engine_dir / "weights.blob"),
                   .booster = plan.booster,
                   .boosters = plan.boosters.count,
                   .arrangement = plan.boosters.arrangement,
                   .alignment = kAlign,
                   .kv_page_tokens = plan.kv_page_tokens,
                   .kv_page_bytes = plan.kv_page_bytes,
                   .max_context = plan.max_context,
                   .max_streams = plan.max_streams,
                   .prefill_chunk = plan.prefill_chunk,
                   .plan_fingerprint = plan.plan_fingerprint(),
                   .device_name = machine.device_name,
                   .device_count = machine.devices,
                   .nccl_version = linked_nccl_version()};
}

namespace {

std::string shown(const Json& v) { return v.is_string() ? "'" + v.get<std::string>() + "'" : v.dump(); }

std::string difference(const Handshake& want, const Handshake& got, bool machine, const Labels& l) {
  const Json w = want.to_json(), g = got.to_json();
  for (auto it = w.begin(); it != w.end(); ++it) {
    const std::string& field = it.key();
    if (!machine && (field == "device_name" || field == "device_count" || field == "nccl_version")) continue;
    if (g.at(field) != it.value())
      return fmt::format("{}: {} {}, {} {}", field, shown(g.at(field)), l.got, shown(it.value()), l.want);
  }
  return "";
}

}  // namespace

std::string plan_difference(const Handshake& want, const Handshake& got, const std::string& plan_device, const Labels& l) {
  if (std::string d = difference(want, got, false, l); !d.empty()) return d;
  if (!plan_device.empty() && got.device_name != plan_device)
    return fmt::format("device_name: '{}' {}, '{}' {}", got.device_name, l.got, plan_device, l.want);
  return "";
}

std::string peer_difference(const Handshake& want, const Handshake& got, const Labels& l) {
  return difference(want, got, true, l);
}

}  // namespace rocket
