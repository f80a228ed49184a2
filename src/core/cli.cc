#include "core/cli.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace rocket {

std::optional<int> parse_command(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<const char*> argv = {app.get_name().c_str()};
  for (const std::string& a : args) argv.push_back(a.c_str());
  // Extras are collected rather than thrown so the message can name them in the order given.
  app.allow_extras();
  try {
    app.parse(int(argv.size()), argv.data());
    const std::vector<std::string> extras = app.remaining();
    if (extras.empty()) return std::nullopt;
    std::string words;
    for (const std::string& w : extras) words += (words.empty() ? "" : " ") + w;
    std::fprintf(stderr, "%s: unknown argument%s: %s (%s --help lists the options)\n", app.get_name().c_str(),
                 extras.size() > 1 ? "s" : "", words.c_str(), app.get_name().c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help
      std::fputs(app.help().c_str(), stdout);
      return 0;
    }
    std::fprintf(stderr, "%s: %s (%s --help lists the options)\n", app.get_name().c_str(), e.what(), app.get_name().c_str());
    return 2;
  }
}

namespace {

CLI::Validator bounded(double lo, double hi, std::string bound) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || std::isnan(v)) return fmt::format("{} is not a number", text);
        if (v < lo || v > hi) return fmt::format("{} is not {}", text, bound);
        return "";
      },
      bound);
}

}  // namespace

CLI::Validator in_range(double lo, double hi) { return bounded(lo, hi, fmt::format("in [{}, {}]", lo, hi)); }

CLI::Validator at_least(double lo) { return bounded(lo, INFINITY, fmt::format(">= {}", lo)); }

}  // namespace rocket
