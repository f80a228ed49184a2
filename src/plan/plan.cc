#include "plan/plan.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string_view>

#include "core/align.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/json_number.h"

namespace rocket {

using nlohmann::json;

const PlanTensor* Plan::find_tensor(const std::string& name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const PlanTensor& t, const std::string& n) { return t.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

const PlanTensor& Plan::tensor(const std::string& name) const {
  if (const PlanTensor* t = find_tensor(name)) return *t;
  fail("plan: no tensor '{}'", name);
}

const PlanBuffer& Plan::buffer(const std::string& name) const {
  for (const auto& b : buffers) if (b.name == name) return b;
  fail("plan: no buffer '{}'", name);
}

json Plan::to_json() const {
  json ts = json::array(), bs = json::array(), rs = json::array(), ks = json::array();
  for (const auto& t : tensors)
    ts.push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"offset", t.offset},
                  {"bytes", t.bytes}});
  for (const auto& b : buffers)
    bs.push_back({{"name", b.name}, {"region", b.region}, {"offset", b.offset}, {"bytes", b.bytes}});
  for (const auto& r : regions) rs.push_back({{"name", r.name}, {"offset", r.offset}, {"bytes", r.bytes}});
  for (const auto& k : kernels) {
    json tile = json::object();
    for (const auto& [name, value] : k.tile) tile[name] = value;
    ks.push_back({{"kernel", k.kernel}, {"bucket", k.bucket}, {"grid", k.grid}, {"threads", k.threads},
                  {"smem_bytes", k.smem_bytes}, {"tile", tile}});
  }
  json unused = json::array();
  for (const UnusedTensors& u : unused_tensors)
    unused.push_back({{"part", u.part}, {"prefix", u.prefix}, {"tensors", u.tensors}, {"bytes", u.bytes}});
  json j = json{{"rocket_plan_version", version}, {"booster", booster}, {"fingerprint", fingerprint},
              {"chemistry", chemistry.to_json()}, {"fuel_dir", fuel_dir}, {"fuel_layout", fuel_layout},
              {"unused_tensors", unused}, {"buckets", buckets},
              {"max_streams", max_streams}, {"max_context", max_context}, {"prefill_chunk", prefill_chunk},
              {"max_rows", max_rows}, {"logit_rows", logit_rows}, {"activation_bytes", activation_bytes}, {"kv_bytes", kv_bytes},
              {"kv_cache", {{"page_tokens", kv_page_tokens}, {"page_bytes", kv_page_bytes}, {"pages", kv_pages}}},
              {"state_snapshots", state_snapshots},
              {"blob_bytes", blob_bytes}, {"arena_bytes", arena_bytes},
              {"booster_limits", {{"sms", limits.sms}, {"smem_per_block", limits.smem_per_block}, {"l2_bytes", limits.l2_bytes}}},
              {"memory_map", {{"regions", rs}, {"buffers", bs}, {"tensors", ts}}}, {"kernels", ks},
              {"static_fire", {{"prompt", static_fire.prompt}, {"token", static_fire.token},
                               {"margin", static_fire.margin}, {"source", static_fire.source}}}};
  // Written only when they say something: a one-booster plan in the identity order is the plan every
  // build wrote before them, byte for byte.
  if (boosters.present()) {
    json b = {{"count", boosters.count}, {"arrangement", boosters.arrangement}};
    if (!boosters.device_name.empty()) b["device_name"] = boosters.device_name;
    if (boosters.arrangement == kSplit) {
      const PlanExchange& x = boosters.exchange;
      b["placement"] = boosters.placement;
      b["residency"] = boosters.residency;
      b["exchange"] = {{"pattern", x.pattern}, {"transport", x.transport}, {"moe_layers", x.moe_layers},
                       {"decode_rows", x.decode_rows}, {"prefill_rows", x.prefill_rows}, {"row_bytes", x.row_bytes}};
    }
    j["boosters"] = std::move(b);
  }
  if (!expert_order.units.empty()) j["expert_order"] = {{"source", expert_order.source}, {"units", expert_order.units}};
  if (!precision_gate.is_null()) j["precision_gate"] = precision_gate;
  if (draft_tokens) j["draft_tokens"] = draft_tokens;
  if (vision) j["vision"] = vision->to_json();  // absent without one: text plans keep their bytes
  return j;
}

int Plan::expert_unit(int layer, int expert) const {
  return expert_order.units.empty() ? expert : expert_order.units[size_t(layer)][size_t(expert)];
}

std::vector<TensorSpec> Plan::weights_manifest() const {
  std::vector<TensorSpec> m = fuel_manifest(chemistry);
  if (draft_tokens) {
    std::vector<TensorSpec> mtp = mtp_manifest(chemistry);
    m.insert(m.end(), mtp.begin(), mtp.end());
  }
  if (vision) {
    std::vector<TensorSpec> tower = vision_tower_manifest(vision->tower);
    m.insert(m.end(), tower.begin(), tower.end());
  }
  return m;
}

std::string Plan::router_name(int layer) { return fmt::format("layers.{}.mlp.gate.weight", layer); }

std::string Plan::plan_fingerprint() const {
  json j = to_json();
  for (const char* informational : {"fuel_dir", "fuel_layout", "unused_tensors", "precision_gate"}) j.erase(informational);
  j["static_fire"].erase("source");
  if (j.contains("expert_order")) j["expert_order"].erase("source");
  Fnv64 h;
  h.update(j.dump());
  return fmt::format("{:016x}", h.digest());
}

Plan Plan::from_json(const json& j, const std::string& path) {
  Plan p;
  try {
    p.version = number(j.at("rocket_plan_version"));
    if (p.version != kPlanVersion) fail("{}: plan version {} (this build reads version {})", path, p.version, kPlanVersion);
    p.booster = j.at("booster");
    p.fingerprint = j.at("fingerprint");
    p.chemistry = chemistry_from_json(j.at("chemistry"));
    p.fuel_dir = j.value("fuel_dir", "");
    p.fuel_layout = j.value("fuel_layout", "");
    if (j.contains("unused_tensors"))
      for (const auto& u : j.at("unused_tensors"))
        p.unused_tensors.push_back({u.at("part"), u.at("prefix"), number(u.at("tensors")), number(u.at("bytes"))});
    p.buckets = numbers<std::vector<int>>(j.at("buckets"));
    p.max_streams = number(j.at("max_streams"));
    p.max_context = number(j.at("max_context"));
    p.prefill_chunk = number(j.at("prefill_chunk"));
    p.max_rows = number(j.at("max_rows"));
    p.logit_rows = number(j.at("logit_rows"));
    p.activation_bytes = number(j.at("activation_bytes"));
    p.kv_bytes = number(j.at("kv_bytes"));
    p.kv_page_tokens = number(j.at("kv_cache").at("page_tokens"));
    p.kv_page_bytes = number(j.at("kv_cache").at("page_bytes"));
    p.kv_pages = number(j.at("kv_cache").at("pages"));
    p.state_snapshots = number(j.at("state_snapshots"));
    p.blob_bytes = number(j.at("blob_bytes"));
    p.arena_bytes = number(j.at("arena_bytes"));
    const json& lim = j.at("booster_limits");
    p.limits = {number(lim.at("sms")), number(lim.at("smem_per_block")), number(lim.at("l2_bytes"))};
    const json& mm = j.at("memory_map");
    for (const auto& r : mm.at("regions")) p.regions.push_back({r.at("name"), number(r.at("offset")), number(r.at("bytes"))});
    for (const auto& b : mm.at("buffers"))
      p.buffers.push_back({b.at("name"), b.at("region"), number(b.at("offset")), number(b.at("bytes"))});
    for (const auto& t : mm.at("tensors")) {
      PlanTensor pt;
      pt.name = t.at("name");
      if (!parse_dtype(t.at("dtype").get<std::string>(), &pt.dtype))
        fail("{}: tensor {} has unknown dtype {}", path, pt.name, t.at("dtype").dump());
      pt.shape = numbers<std::vector<int64_t>>(t.at("shape"));
      pt.offset = number(t.at("offset"));
      pt.bytes = number(t.at("bytes"));
      p.tensors.push_back(std::move(pt));
    }
    for (const auto& k : j.at("kernels")) {
      PlanKernel pk{k.at("kernel"),          number(k.at("bucket")),     number(k.at("grid")),
                     number(k.at("threads")), number(k.at("smem_bytes")), {}};
      for (const auto& [name, value] : k.at("tile").items()) pk.tile.emplace_back(name, json_number<int64_t>(value));
      p.kernels.push_back(std::move(pk));
    }
    if (j.contains("precision_gate")) p.precision_gate = j.at("precision_gate");
    if (j.contains("draft_tokens")) p.draft_tokens = number(j.at("draft_tokens"));
    if (j.contains("vision")) p.vision = PlanVision::from_json(j.at("vision"), path);
    const json& sf = j.at("static_fire");
    p.static_fire = {numbers<std::vector<int32_t>>(sf.at("prompt")), number(sf.at("token")), number(sf.at("margin")),
                     sf.at("source")};
    if (j.contains("boosters")) {
      const json& b = j.at("boosters");
      p.boosters.count = number(b.at("count"));
      p.boosters.arrangement = b.at("arrangement");
      p.boosters.device_name = b.value("device_name", "");
      if (p.boosters.arrangement == kSplit) {
        p.boosters.placement = numbers<std::vector<std::vector<std::vector<int>>>>(b.at("placement"));
        p.boosters.residency = number(b.at("residency"));
        const json& x = b.at("exchange");
        p.boosters.exchange = {x.at("pattern"),
                               x.at("transport"),
                               number(x.at("moe_layers")),
                               number(x.at("decode_rows")),
                               number(x.at("prefill_rows")),
                               number(x.at("row_bytes"))};
      }
      if (!p.boosters.present())
        fail("{}: a 'boosters' entry for one replicated booster (a plan without one says that)", path);
    }
    if (j.contains("expert_order")) {
      p.expert_order.source = j.at("expert_order").at("source");
      p.expert_order.units = numbers<std::vector<std::vector<int>>>(j.at("expert_order").at("units"));
      if (p.expert_order.units.empty()) fail("{}: an 'expert_order' without units (a plan without one says identity)", path);
    }
  } catch (const json::exception& e) {
    fail("{}: malformed plan: {}", path, e.what());
  }
  std::sort(p.tensors.begin(), p.tensors.end(), [](auto& a, auto& b) { return a.name < b.name; });
  p.validate(path);
  return p;
}

Plan Plan::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail("{}: cannot open plan", path);
  json j;
  try {
    j = json::parse(f);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", path, e.what());
  }
  return from_json(j, path);
}

void Plan::validate(const std::string& path) const {
  if (chemistry.fingerprint() != fingerprint)
    fail("{}: fingerprint {} does not match its own chemistry ({})", path, fingerprint, chemistry.fingerprint());
  if (buckets.empty() || max_streams != *std::max_element(buckets.begin(), buckets.end()))
    fail("{}: max_streams {} must equal the largest bucket", path, max_streams);
  if (prefill_chunk < 1 || max_rows != std::max(max_streams, prefill_chunk))
    fail("{}: max_rows {} must be max(max_streams {}, prefill_chunk {})", path, max_rows, max_streams, prefill_chunk);
  if (logit_rows < std::min(max_rows, max_streams) || logit_rows > max_rows)
    fail("{}: logit_rows {} outside [max_streams, max_rows]", path, logit_rows);
  if (draft_tokens < 0 || draft_tokens > kMaxDraftTokens)
    fail("{}: draft_tokens {} outside [0, {}]", path, draft_tokens, kMaxDraftTokens);
  if (draft_tokens && chemistry.mtp_layers < 1)
    fail("{}: draft_tokens {} but the chemistry has no MTP layer to draft with", path, draft_tokens);
  if (draft_tokens + 1 > max_rows) fail("{}: a verify step's {} rows exceed max_rows {}", path, draft_tokens + 1, max_rows);
  for (int32_t id : static_fire.prompt)
    if (id < 0 || id >= chemistry.vocab) fail("{}: static_fire prompt token {} outside the vocabulary", path, id);
  if (!static_fire.prompt.empty() && (static_fire.token < 0 || static_fire.token >= chemistry.vocab))
    fail("{}: static_fire token {} outside the vocabulary", path, static_fire.token);
  if (!is_aligned(blob_bytes) || !is_aligned(arena_bytes) || blob_bytes > arena_bytes)
    fail("{}: blob_bytes {} / arena_bytes {} must be 64 KiB aligned with blob <= arena", path, blob_bytes, arena_bytes);
  if (kv_page_bytes == 0 || !is_aligned(kv_page_bytes))
    fail("{}: kv page bytes {} must be a positive 64 KiB multiple", path, kv_page_bytes);
  auto region_of = [&](const std::string& name) -> const PlanRegion& {
    for (const auto& r : regions) if (r.name == name) return r;
    fail("{}: unknown region '{}'", path, name);
  };
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& r : regions) {
    if (!is_aligned(r.offset) || r.offset + r.bytes > arena_bytes)
      fail("{}: region {} [{}, +{}) misaligned or outside the arena ({})", path, r.name, r.offset, r.bytes, arena_bytes);
    spans.push_back({r.offset, r.offset + r.bytes});
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second) fail("{}: memory map regions overlap at offset {}", path, spans[i].first);
  const PlanRegion& weights = region_of("weights");
  if (weights.offset != 0 || weights.bytes != blob_bytes) fail("{}: weights region must be [0, blob_bytes)", path);
  for (const auto& b : buffers) {
    const PlanRegion& r = region_of(b.region);
    if (!is_aligned(b.offset) || b.offset < r.offset || b.offset + b.bytes > r.offset + r.bytes)
      fail("{}: buffer {} at {} (+{}) misaligned or outside region {}", path, b.name, b.offset, b.bytes, r.name);
  }
  std::set<std::string_view> names;
  for (const auto& t : tensors)
    if (!names.insert(t.name).second) fail("{}: tensor {} is listed twice", path, t.name);
  for (const auto& t : tensors)
    if (t.offset % 256 != 0 || t.offset + t.bytes > blob_bytes)
      fail("{}: tensor {} at {} (+{}) misaligned or outside the weights region", path, t.name, t.offset, t.bytes);
  if (vision) {
    // The h200 engine runs the tower at the head dims its attention is built for, one image per prefill
    // piece (bound_pixels_by_prefill_chunk), in the buffers the compiler sized for that image.
    if (booster == "h200") {
      check_h200_vision(*vision, path);
      PlanVision bounded = *vision;
      bound_pixels_by_prefill_chunk(bounded, prefill_chunk, path);
      if (bounded.processor.max_pixels != vision->processor.max_pixels)
        fail("{}: vision.processor.max_pixels {} is over the prefill chunk's {} (an h200 engine encodes an image within "
             "one prefill piece)", path, vision->processor.max_pixels, bounded.processor.max_pixels);
      const VisionBufferBytes need = h200_vision_buffer_bytes(*vision, prefill_chunk, chemistry.hidden);
      for (const auto& [name, bytes] : {std::pair{"vision_inputs", need.inputs}, std::pair{"vision_scratch", need.scratch},
                                        std::pair{"image_rows", need.image_rows}})
        if (const auto b = std::find_if(buffers.begin(), buffers.end(), [&](const PlanBuffer& x) { return x.name == name; });
            b == buffers.end() || b->bytes != bytes)
          fail("{}: an h200 plan with a vision tower needs buffer {} of {} bytes", path, name, bytes);
    }
    if (vision->tower.out_hidden != chemistry.hidden)
      fail("{}: vision out_hidden_size {} differs from hidden_size {}", path, vision->tower.out_hidden, chemistry.hidden);
    for (int32_t id : {vision->image_token, vision->vision_start_token, vision->vision_end_token})
      if (id < 0 || id >= chemistry.vocab) fail("{}: vision token {} outside the vocabulary", path, id);
    for (const TensorSpec& t : vision_tower_manifest(vision->tower)) {
      const PlanTensor* pt = find_tensor(t.name);
      if (!pt || pt->dtype != t.dtype || pt->bytes != t.nbytes())
        fail("{}: vision tensor {} is missing from the memory map or not {} bytes of {}", path, t.name, t.nbytes(),
             dtype_name(t.dtype));
    }
  }
  validate_kernels(path);
  validate_experts(path);
}

void Plan::validate_experts(const std::string& path) const {
  const int L = chemistry.layers, E = chemistry.experts;
  const PlanBoosters& b = boosters;
  if (b.count < 1 || b.count > 64) fail("{}: boosters.count {} outside [1, 64]", path, b.count);
  if (b.arrangement != kReplicated && b.arrangement != kSplit)
    fail("{}: boosters.arrangement '{}' (expected {} or {})", path, b.arrangement, kReplicated, kSplit);
  const auto& units = expert_order.units;
  if (!units.empty()) {
    if (int(units.size()) != L) fail("{}: expert_order.units has {} layers, the chemistry {}", path, units.size(), L);
    for (int l = 0; l < L; ++l) {
      if (int(units[size_t(l)].size()) != E)
        fail("{}: expert_order.units[{}] has {} experts, the chemistry {}", path, l, units[size_t(l)].size(), E);
      std::vector<bool> seen(units[size_t(l)].size(), false);
      for (int u : units[size_t(l)]) {
        if (u < 0 || u >= E || seen[size_t(u)]) fail("{}: expert_order.units[{}] is not a permutation of 0..{}", path, l, E - 1);
        seen[size_t(u)] = true;
      }
    }
  }
  // The blob holds the experts in that order: expert e's unit begins at the layer's first unit plus
  // its unit index times the stride, which codegen checks exactly; here, that offsets follow the units.
  std::map<int, std::vector<std::pair<int, uint64_t>>> unit_at;  // layer -> (unit, offset)
  for (const PlanTensor& t : tensors) {
    int l = -1, e = -1, used = 0;
    if (std::sscanf(t.name.c_str(), "layers.%d.mlp.experts.%d.gate_proj.weight%n", &l, &e, &used) != 2 ||
        size_t(used) != t.name.size())
      continue;
    if (l < 0 || l >= L || e < 0 || e >= E) fail("{}: tensor {} names an expert the chemistry does not have", path, t.name);
    unit_at[l].push_back({expert_unit(l, e), t.offset});
  }
  for (auto& [l, at] : unit_at) {
    std::sort(at.begin(), at.end());
    for (size_t i = 1; i < at.size(); ++i)
      if (at[i].second <= at[i - 1].second)
        fail("{}: layer {}: the blob does not hold the experts in the plan's expert order (unit {} at {} after unit {} at {})",
             path, l, at[i].first, at[i].second, at[i - 1].first, at[i - 1].second);
  }
  if (b.arrangement != kSplit) {
    if (!b.placement.empty()) fail("{}: a {} plan with a split placement", path, b.arrangement);
    return;
  }
  if (b.count < 2) fail("{}: a split arrangement over {} booster", path, b.count);
  if (E % b.count != 0) fail("{}: {} experts do not split evenly over {} boosters", path, E, b.count);
  if (int(b.placement.size()) != L) fail("{}: boosters.placement has {} layers, the chemistry {}", path, b.placement.size(), L);
  for (int l = 0; l < L; ++l) {
    const auto& on = b.placement[size_t(l)];
    if (int(on.size()) != b.count) fail("{}: boosters.placement[{}] lists {} boosters, not {}", path, l, on.size(), b.count);
    // The boosters' experts, one after another, are the units in order.
    int unit = 0;
    for (int k = 0; k < b.count; ++k) {
      if (int(on[size_t(k)].size()) != E / b.count)
        fail("{}: boosters.placement[{}][{}] holds {} experts, not {} / {}", path, l, k, on[size_t(k)].size(), E, b.count);
      for (int e : on[size_t(k)]) {
        if (e < 0 || e >= E) fail("{}: boosters.placement[{}][{}] names expert {}", path, l, k, e);
        if (expert_unit(l, e) != unit)
          fail("{}: boosters.placement[{}]: expert {} on booster {} should be unit {}, the expert order says {}", path, l,
               e, k, unit, expert_unit(l, e));
        ++unit;
      }
    }
  }
  if (b.residency == 0 || b.residency > arena_bytes || !is_aligned(b.residency))
    fail("{}: boosters.residency {} must be 64 KiB aligned in (0, arena_bytes {}]", path, b.residency, arena_bytes);
  const PlanExchange& x = b.exchange;
  if (x.moe_layers != L || x.decode_rows != int64_t(max_streams) * chemistry.top_k ||
      x.prefill_rows != int64_t(prefill_chunk) * chemistry.top_k ||
      x.row_bytes != uint64_t(chemistry.hidden) * uint64_t(activation_bytes))
    fail("{}: boosters.exchange ({} layers, {} / {} rows of {} bytes) is not this plan's ({} layers, {} / {} rows of {} bytes)",
         path, x.moe_layers, x.decode_rows, x.prefill_rows, x.row_bytes, L, int64_t(max_streams) * chemistry.top_k,
         int64_t(prefill_chunk) * chemistry.top_k, uint64_t(chemistry.hidden) * uint64_t(activation_bytes));
}

void Plan::validate_kernels(const std::string& path) const {
  if (limits.sms < 0 || limits.smem_per_block < 0) fail("{}: negative booster limits", path);
  std::map<std::string, std::set<int>> seen;
  for (const auto& k : kernels) {
    if (k.kernel.empty()) fail("{}: a kernel entry without a name", path);
    if (std::find(buckets.begin(), buckets.end(), k.bucket) == buckets.end())
      fail("{}: kernel {} at bucket {}, which the plan does not compile", path, k.kernel, k.bucket);
    if (!seen[k.kernel].insert(k.bucket).second) fail("{}: kernel {} listed twice at bucket {}", path, k.kernel, k.bucket);
    if (k.grid < 1 || k.threads < 32 || k.threads > 1024 || k.threads % 32 != 0)
      fail("{}: kernel {} at bucket {}: grid {} x {} threads is not a launch (whole warps, at most 1024)", path, k.kernel,
           k.bucket, k.grid, k.threads);
    if (k.smem_bytes < 0 || k.smem_bytes > limits.smem_per_block)
      fail("{}: kernel {} at bucket {} takes {} bytes of shared memory, the booster has {} per block", path, k.kernel,
           k.bucket, k.smem_bytes, limits.smem_per_block);
    for (const auto& [name, value] : k.tile)
      if (name.empty()) fail("{}: kernel {} at bucket {} has an unnamed tile parameter", path, k.kernel, k.bucket);
  }
  for (const auto& [name, at] : seen)
    if (at.size() != buckets.size()) fail("{}: kernel {} is planned for {} of the {} buckets", path, name, at.size(), buckets.size());
  if (booster == "h200" && kernels.empty()) fail("{}: an h200 plan without its kernel table", path);
}

}  // namespace rocket
