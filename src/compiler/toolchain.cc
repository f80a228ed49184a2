#include "compiler/toolchain.h"

#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace fs = std::filesystem;

namespace rocket {

std::string source_dir() { return ROCKET_SOURCE_DIR; }

struct Unit {
  std::string command;  // the compiler and its flags, without -c SOURCE -o OBJECT
  fs::path source;
};

// Compiles the units in parallel into `obj` (one process each: a 2-core machine builds a host engine in
// half the time one g++ over all its sources took) and fails after all have ended if any failed. At
// most one job per 5 GiB of available memory runs at once: the h200 engine's nvcc compiles peak at up to
// 8 GB each (qwen3_5_moe_step.cu), and all eleven at once ran a 23 GB machine out of memory.
static std::string compile_in_parallel(const std::string& obj, const std::vector<Unit>& units, std::string& objects) {
  std::string sh = fmt::format(
      "mkdir -p '{0}' && rm -f '{0}/FAILED' && "
      "jobs_max=$(awk '/^MemAvailable:/ {{ n = int($2 / 5242880); print (n < 1 ? 1 : n) }}' /proc/meminfo)",
      obj);
  for (const Unit& u : units) {
    const std::string o = obj + "/" + u.source.stem().string() + ".o";
    sh += fmt::format(
        " && {{ while [ \"$(jobs -pr | wc -l)\" -ge \"${{jobs_max:-64}}\" ]; do wait -n || true; done; "
        "( {} -c '{}' -o '{}' || touch '{}/FAILED' ) & }}",
        u.command, u.source.string(), o, obj);
    objects += " '" + o + "'";
  }
  return sh + fmt::format(" && wait && test ! -e '{}/FAILED'", obj);
}

std::string host_engine_compile_command(const std::string& engine_dir, const std::string& output) {
  const std::string src = source_dir() + "/src";
  // -march=native: a host engine is built for the machine it runs on (booster identity). The flags
  // are this CLI's build's (-O2 -fopenmp; a sanitized build's instrumentation, CMakeLists.txt).
  const std::string flags = fmt::format("'{}' -std=c++20 {} -march=native", ROCKET_CXX, ROCKET_ENGINE_FLAGS);
  // The engine's own sources; the rocket-engine command line every engine binary has is CMake's object.
  std::vector<Unit> units;
  const std::string compile = fmt::format("{} -I'{}' -I'{}'", flags, engine_dir, src);
  for (const auto& e : fs::directory_iterator(src + "/engine/host"))
    if (e.path().extension() == ".cc") units.push_back({compile, e.path()});
#ifdef ROCKET_ENGINE_LINK_CUDA
  const char* link = ROCKET_ENGINE_LINK " " ROCKET_ENGINE_LINK_CUDA;
#else
  const char* link = ROCKET_ENGINE_LINK;
#endif
  std::string objects = " '" ROCKET_ENGINE_CLI_OBJECT "'";
  const std::string sh = compile_in_parallel(engine_dir + "/obj", units, objects);
  return fmt::format("set -e -o pipefail; {} && {}{} {} -static-libstdc++ -static-libgcc -o '{}'", sh, flags, objects, link,
                     output);
}

std::string h200_engine_compile_command(const std::string& engine_dir, const std::string& output) {
#ifdef ROCKET_H200_ENGINE_LINK
  const std::string src = source_dir() + "/src";
  const std::string obj = engine_dir + "/obj";
  // Host sources with g++ (fmt does not compile under nvcc), CUDA sources with nvcc, all at once;
  // then one link: everything static but cpp-httplib and fmt (Debian ships no archive of either) and
  // cuBLAS. The shared libraries the binary needs beyond libc and cuBLAS are copied into ENGINE_DIR/lib, which the
  // binary searches first (DT_RPATH, which also covers the libraries' own dependencies, unlike
  // DT_RUNPATH), so the engine directory runs wherever it is copied. cuBLAS (its Lt half alone is
  // ~500 MB) is the CUDA toolkit's on the machine that runs the engine: searched next in the build's
  // toolkit directory, then LD_LIBRARY_PATH.
  // The engine's own sources; the rocket-engine command line every engine binary has is CMake's object.
  const std::string cc = fmt::format("'{}' -std=c++20 -O2 -I'{}' -I'{}'", ROCKET_CXX, src, ROCKET_CUDA_INCLUDE);
  const std::string cu = fmt::format("'{}' -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -I'{}' -I'{}'",
                                     ROCKET_NVCC, engine_dir, src);
  std::vector<Unit> units;
  for (const auto& e : fs::directory_iterator(src + "/engine/h200")) {
    if (e.path().extension() == ".cc") units.push_back({cc, e.path()});
    else if (e.path().extension() == ".cu") units.push_back({cu, e.path()});
  }
  std::string objects = " '" ROCKET_ENGINE_CLI_OBJECT "'";
  const std::string compile = compile_in_parallel(obj, units, objects);
  const std::string lib = engine_dir + "/lib";
  return fmt::format("set -e -o pipefail; {} && '{}' -gencode=arch=compute_90a,code=sm_90a "
                     "-cudart static -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc{} {} -o '{}' -lcpp-httplib -lprometheus-cpp-core -lpthread "
                     "-lcublas -ldl -lrt -Xlinker --disable-new-dtags -Xlinker -rpath -Xlinker '$ORIGIN/../lib:{}' && mkdir -p '{}' && "
                     "ldd '{}' | awk '$2 == \"=>\" && $3 ~ /^\\// {{print $3}}' | "
                     "{{ grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcublas(Lt)?)\\.so' || true; }} | "
                     "xargs -r cp -L -t '{}'",
                     compile, ROCKET_NVCC, objects, ROCKET_H200_ENGINE_LINK, output, ROCKET_CUDA_LIB, lib, output, lib);
#else
  fail("build: this rocket was built without nvcc, so it cannot compile the h200 engine for {}", engine_dir);
#endif
}

}  // namespace rocket
