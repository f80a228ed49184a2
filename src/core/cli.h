// Every command line of every binary (rocket, both engines' rocket-engine) is parsed by CLI11, one
// CLI::App per command, so they all refuse the same way: an unknown or misspelt flag, a missing
// value, a malformed number or one outside its range is a usage error (exit 2, the reason on
// stderr), never silently ignored; --help prints the command's options.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace rocket {

// Parses `args`, the words after the command's name, into the options `app` declares. Returns
// nullopt when the command should run, else its exit status: 0 after --help (printed on stdout),
// 2 after a usage error ("NAME: REASON (NAME --help lists the options)" on stderr).
std::optional<int> parse_command(CLI::App& app, const std::vector<std::string>& args);

// Option checks that read the text as a number (NaN and trailing junk refused) and say the bound:
// "--top-p: 2 is not in [0, 1]".
CLI::Validator in_range(double lo, double hi);
CLI::Validator at_least(double lo);

}  // namespace rocket
