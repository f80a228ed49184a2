#include "compiler/condition.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <vector>

#include <fmt/ranges.h>

#include "compiler/nvfp4_code.h"
#include "core/error.h"
#include "core/progress.h"
#include "fuel/manifest.h"
#include "fuel/quantize.h"

namespace rocket {
namespace {

// What conditioning does to one part. An h200 plan's NVFP4 parts (packed e2m1 `weight` with an e4m3
// `weight_scale` sibling) go into the register code its kernels decode (nvfp4_code.h), and its routers
// into unit order when it orders the experts (Plan::router_in_unit_order); every other part, and
// every part of a host plan, is the checkpoint's bytes.
enum class Coding { kAsIs, kNvfp4Weights, kNvfp4Scales, kRouterInUnitOrder };

constexpr std::string_view kScaleSuffix = "_scale";

// The layer whose router `name` is, or -1.
int router_layer(const Plan& plan, const std::string& name) {
  for (int l = 0; l < plan.chemistry.layers; ++l)
    if (name == Plan::router_name(l)) return l;
  return -1;
}

Coding coding_of(const Plan& plan, const PlanTensor& t) {
  if (plan.booster != "h200") return Coding::kAsIs;
  if (plan.router_in_unit_order() && router_layer(plan, t.name) >= 0) return Coding::kRouterInUnitOrder;
  if (t.dtype == DType::kU8) {
    const PlanTensor* s = plan.find_tensor(t.name + std::string(kScaleSuffix));
    if (s && s->dtype == DType::kF8E4M3) return Coding::kNvfp4Weights;
  }
  if (t.dtype == DType::kF8E4M3 && t.name.ends_with(kScaleSuffix)) {
    const PlanTensor* w = plan.find_tensor(t.name.substr(0, t.name.size() - kScaleSuffix.size()));
    if (w && w->dtype == DType::kU8) return Coding::kNvfp4Scales;
  }
  return Coding::kAsIs;
}

// The weight a stored part belongs to: "X.weight_scale_inv", "X.weight_scale", "X.weight_scale_2" and
// "X.input_scale" are parts of "X.weight".
std::string weight_of_part(const std::string& name) {
  if (const size_t at = name.rfind(".weight_scale"); at != std::string::npos) return name.substr(0, at) + ".weight";
  if (name.ends_with(".input_scale")) return name.substr(0, name.size() - 12) + ".weight";
  return name;
}

// A plan part's bytes: the fuel's own where it stores the part as the plan has it, else converted from
// the fuel's BF16 weight to the plan's precision (its map differs: compiler/precision_map.h). One
// weight's converted parts are kept until another weight is asked for, so its scale parts that
// follow it in the plan cost no second conversion.
class PartSource {
 public:
  PartSource(const Fuel& fuel, const Plan& plan)
      : fuel_(fuel), plan_manifest_(plan.weights_manifest()), fuel_mtp_(mtp_manifest(fuel.chemistry())) {
    for (const TensorSpec& t : plan_manifest_) plan_spec_[t.name] = &t;
    for (const TensorSpec& t : fuel.manifest()) fuel_spec_[t.name] = &t;
    for (const TensorSpec& t : fuel_mtp_) fuel_spec_[t.name] = &t;
    if (plan.vision) {
      if (!fuel.vision()) fail("the plan carries a vision tower and the fuel {} holds none", fuel.dir());
      fuel_vision_ = vision_tower_manifest(*fuel.vision());
      for (const TensorSpec& t : fuel_vision_) fuel_spec_[t.name] = &t;
    }
  }

  const uint8_t* bytes(const std::string& name, uint64_t size) {
    const auto plan_it = plan_spec_.find(name);
    CHECK(plan_it != plan_spec_.end(), name + ": not in the plan's manifest");
    const TensorSpec& want = *plan_it->second;
    if (const auto it = fuel_spec_.find(name);
        it != fuel_spec_.end() && it->second->dtype == want.dtype && it->second->precision == want.precision) {
      const TensorView v = fuel_.tensor(name);
      CHECK(v.nbytes == size, name);
      return v.data;
    }
    const std::string weight = weight_of_part(name);
    if (weight != converted_) convert(weight);
    const auto it = parts_.find(want.part);
    CHECK(it != parts_.end() && it->second.size() == size, name + ": converted part of the wrong size");
    return it->second.data();
  }

 private:
  void convert(const std::string& weight) {
    const auto it = plan_spec_.find(weight);
    const auto source = fuel_spec_.find(weight);
    if (it == plan_spec_.end() || source == fuel_spec_.end() || source->second->dtype != DType::kBF16)
      fail("{}: the plan keeps it in {}, and the fuel does not store it in BF16 to convert from", weight,
           it == plan_spec_.end() ? "?" : precision_name(it->second->precision));
    const TensorSpec& w = *it->second;
    parts_ = quantize_bf16(w, w.rows, w.cols, fuel_.tensor(weight));
    converted_ = weight;
  }

  const Fuel& fuel_;
  std::vector<TensorSpec> plan_manifest_, fuel_mtp_, fuel_vision_;
  std::unordered_map<std::string, const TensorSpec*> plan_spec_, fuel_spec_;
  std::string converted_;
  Parts parts_;
};

// The coded bytes of an NVFP4 part, in pieces of whole rows (a fused tensor may be gigabytes).
template <class Write>
void encode_nvfp4(PartSource& source, const Plan& plan, const PlanTensor& t, Coding coding, Write&& write) {
  const std::string weight_name = coding == Coding::kNvfp4Weights ? t.name : t.name.substr(0, t.name.size() - kScaleSuffix.size());
  const std::string scale_name = weight_name + std::string(kScaleSuffix);
  const PlanTensor* wt = plan.find_tensor(weight_name);
  const PlanTensor* st = plan.find_tensor(scale_name);
  CHECK(wt && st, weight_name + ": an NVFP4 weight without its scales in the plan");
  struct Part {
    const uint8_t* data;
    uint64_t nbytes;
  };
  const Part w{source.bytes(weight_name, wt->bytes), wt->bytes}, s{source.bytes(scale_name, st->bytes), st->bytes};
  // Rows are every index but the last (a fused expert tensor is [experts][rows][...]).
  CHECK(t.shape.size() >= 2, t.name + ": an NVFP4 part has rows and columns");
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < t.shape.size(); ++d) rows *= t.shape[d];
  const int64_t cols = coding == Coding::kNvfp4Weights ? 2 * t.shape.back() : 16 * t.shape.back();
  if (cols % 16 != 0 || w.nbytes != uint64_t(rows * cols / 2) || s.nbytes != uint64_t(rows * cols / 16))
    fail("{}: NVFP4 weight {} x {} does not match its parts ({} packed bytes, {} scales)", weight_name, rows, cols, w.nbytes,
         s.nbytes);
  const int64_t row_bytes = coding == Coding::kNvfp4Weights ? cols / 2 : cols / 16;
  const int64_t piece_rows = std::max<int64_t>(1, (64 << 20) / row_bytes);
  std::vector<uint8_t> out;
  for (int64_t r0 = 0; r0 < rows; r0 += piece_rows) {
    const int64_t n = std::min(piece_rows, rows - r0);
    out.resize(size_t(n * row_bytes));
    const uint8_t* packed = w.data + r0 * cols / 2;
    const uint8_t* scales = s.data + r0 * cols / 16;
    try {
      if (coding == Coding::kNvfp4Weights)
        nvfp4_code::encode_matrix(packed, scales, n, cols, out.data(), nullptr);
      else
        nvfp4_code::encode_matrix(packed, scales, n, cols, nullptr, out.data());
    } catch (const Error& e) {
      fail("{}: {}", weight_name, e.what());
    }
    write(out.data(), uint64_t(r0 * row_bytes), out.size());
  }
}

}  // namespace

void condition_weights(const Fuel& fuel, const Plan& plan, const std::string& blob_path) {
  struct File {  // closed on every way out
    int fd;
    ~File() {
      if (fd >= 0) ::close(fd);
    }
  } file{::open(blob_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (file.fd < 0) fail("{}: cannot create: {}", blob_path, std::strerror(errno));
  auto io_fail = [&](const std::string& what) { fail("{}: {}: {}", blob_path, what, std::strerror(errno)); };
  // Sparse-extend to the full size first: the padding between units reads as zeros.
  if (::ftruncate(file.fd, off_t(plan.blob_bytes)) != 0) io_fail("cannot size the blob");
  Progress progress("condition weights", plan.blob_bytes);
  PartSource source(fuel, plan);
  for (const PlanTensor& t : plan.tensors) {
    // Writes bytes [at, at + n) of the part.
    auto write = [&](const uint8_t* data, uint64_t at, uint64_t n) {
      uint64_t done = 0;
      while (done < n) {
        ssize_t w = ::pwrite(file.fd, data + done, std::min<uint64_t>(n - done, 1u << 30), off_t(t.offset + at + done));
        if (w <= 0) io_fail("write of " + t.name + " failed");
        done += uint64_t(w);
      }
    };
    if (const Coding c = coding_of(plan, t); c == Coding::kAsIs) {
      write(source.bytes(t.name, t.bytes), 0, t.bytes);
    } else if (c == Coding::kRouterInUnitOrder) {
      const int l = router_layer(plan, t.name), E = plan.chemistry.experts;
      if (t.shape.size() != 2 || t.shape[0] != E || t.bytes % uint64_t(E) != 0)
        fail("{}: a router of shape {} is not [{} experts][hidden]", t.name, fmt::join(t.shape, "x"), E);
      const uint64_t row = t.bytes / uint64_t(E);
      const uint8_t* data = source.bytes(t.name, t.bytes);
      for (int e = 0; e < E; ++e) write(data + uint64_t(e) * row, uint64_t(plan.expert_unit(l, e)) * row, row);
    } else {
      encode_nvfp4(source, plan, t, c, write);
    }
    progress.advance(t.bytes);
  }
  if (::fsync(file.fd) != 0) io_fail("fsync failed");
  const int fd = file.fd;
  file.fd = -1;
  if (::close(fd) != 0) io_fail("close failed");
  progress.finish();
}

}  // namespace rocket
