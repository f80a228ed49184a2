// Where this rocket was built from and what it compiles engines with: the source tree (engine sources,
// committed booster profiles, the tokenizer package) and the compilers and link lines CMake found.
// The only file that sees those paths (CMakeLists.txt defines them for it alone), so every other
// object is the same bytes in any checkout and a compiler cache shares them.
#pragma once

#include <string>

namespace rocket {

// The checkout `rocket` was built from (holds src/, boosters/, node_modules/).
std::string source_dir();

// The command that compiles an engine binary for the host booster from `engine_dir`/engine.h.
std::string host_engine_compile_command(const std::string& engine_dir, const std::string& output);
// The same for the h200 booster (nvcc; object files under `engine_dir`/obj). Error when this rocket
// was built without nvcc.
std::string h200_engine_compile_command(const std::string& engine_dir, const std::string& output);

}  // namespace rocket
