#include "front/exposition.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace rocket {

namespace {

// One sample line split: `name{labels} value`; labels without their braces, empty when none.
struct Sample {
  std::string name, labels;
  double value = 0;
};

// The end of a label set starting at `open` (its '{'), skipping quoted values with escapes;
// npos when it is not closed.
size_t closing_brace(std::string_view line, size_t open) {
  bool quoted = false;
  for (size_t i = open + 1; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '\\') ++i;
    else if (c == '"') quoted = !quoted;
    else if (!quoted && c == '}') return i;
  }
  return std::string_view::npos;
}

bool parse_sample(std::string_view line, Sample& s) {
  const size_t name_end = line.find_first_of("{ ");
  if (name_end == 0 || name_end == std::string_view::npos) return false;
  s.name = std::string(line.substr(0, name_end));
  size_t rest = name_end;
  s.labels.clear();
  if (line[name_end] == '{') {
    const size_t close = closing_brace(line, name_end);
    if (close == std::string_view::npos) return false;
    s.labels = std::string(line.substr(name_end + 1, close - name_end - 1));
    rest = close + 1;
  }
  // The value is the next field; a timestamp after it (prometheus-cpp writes none) is dropped.
  const std::string tail(line.substr(rest));
  const char* p = tail.c_str();
  char* end = nullptr;
  s.value = std::strtod(p, &end);
  return end != p;
}

// Prometheus spells the non-finite values its own way; fmt's shortest form is exact otherwise.
std::string value_text(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

std::string series(const std::string& name, const std::string& labels) {
  return labels.empty() ? name : fmt::format("{}{{{}}}", name, labels);
}

struct Family {
  std::string help, type = "untyped";
  std::vector<std::string> lines;  // per-replica samples, already labelled
  std::vector<std::string> order;  // summed series in first-seen order
  std::map<std::string, double> sums;
};

}  // namespace

std::string merge_expositions(std::span<const std::string> scrapes) {
  std::vector<std::string> order;
  std::map<std::string, Family> families;
  auto family = [&](const std::string& name) -> Family& {
    auto [it, fresh] = families.try_emplace(name);
    if (fresh) order.push_back(name);
    return it->second;
  };
  for (size_t r = 0; r < scrapes.size(); ++r) {
    std::istringstream in(scrapes[r]);
    std::string line, current;
    while (std::getline(in, line)) {
      if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
        const std::string_view body = std::string_view(line).substr(7);
        const size_t sp = body.find(' ');
        current = std::string(body.substr(0, sp));
        const std::string text = sp == std::string_view::npos ? "" : std::string(body.substr(sp + 1));
        Family& f = family(current);
        if (line[2] == 'H') f.help = text;
        else f.type = text;
        continue;
      }
      Sample s;
      if (line.empty() || line[0] == '#' || !parse_sample(line, s)) continue;
      // A sample belongs to the family announced last (histograms add _bucket/_sum/_count to it);
      // one that names no announced family is a family of its own.
      const bool ours = !current.empty() && s.name.rfind(current, 0) == 0;
      Family& f = family(ours ? current : s.name);
      const std::string labelled = s.labels.empty() ? fmt::format("replica=\"{}\"", r)
                                                    : fmt::format("replica=\"{}\",{}", r, s.labels);
      f.lines.push_back(fmt::format("{} {}", series(s.name, labelled), value_text(s.value)));
      const std::string key = series(s.name, s.labels);
      auto [it, fresh] = f.sums.try_emplace(key, 0.0);
      if (fresh) f.order.push_back(key);
      it->second += s.value;
    }
  }
  std::string out;
  for (const std::string& name : order) {
    const Family& f = families.at(name);
    if (!f.help.empty()) out += fmt::format("# HELP {} {}\n", name, f.help);
    out += fmt::format("# TYPE {} {}\n", name, f.type);
    for (const std::string& l : f.lines) out += l + "\n";
    if (f.type == "counter" || f.type == "histogram")
      for (const std::string& key : f.order) out += fmt::format("{} {}\n", key, value_text(f.sums.at(key)));
  }
  return out;
}

}  // namespace rocket
