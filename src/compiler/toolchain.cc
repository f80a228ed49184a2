#include "compiler/toolchain.h"

#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace fs = std::filesystem;

namespace rocket {

std::string source_dir() { return ROCKET_SOURCE_DIR; }

std::string host_engine_compile_command(const std::string& engine_dir, const std::string& output) {
  const std::string src = source_dir() + "/src";
  // The engine's own sources, and the rocket-engine command line every engine binary has.
  std::string sources = " '" + src + "/cli/rocket_engine.cc'";
  for (const auto& e : fs::directory_iterator(src + "/engine/host"))
    if (e.path().extension() == ".cc") sources += " '" + e.path().string() + "'";
#ifdef ROCKET_ENGINE_LINK_CUDA
  const char* link = ROCKET_ENGINE_LINK " " ROCKET_ENGINE_LINK_CUDA;
#else
  const char* link = ROCKET_ENGINE_LINK;
#endif
  // -march=native: a host engine is built for the machine it runs on (booster identity). The flags
  // are this CLI's build's (-O2 -fopenmp; a sanitized build's instrumentation, CMakeLists.txt).
  return fmt::format("'{}' -std=c++20 {} -march=native -DFMT_HEADER_ONLY -I'{}' -I'{}'{} {} "
                     "-static-libstdc++ -static-libgcc -o '{}'",
                     ROCKET_CXX, ROCKET_ENGINE_FLAGS, engine_dir, src, sources, link, output);
}

std::string h200_engine_compile_command(const std::string& engine_dir, const std::string& output) {
#ifdef ROCKET_H200_ENGINE_LINK
  const std::string src = source_dir() + "/src";
  const std::string obj = engine_dir + "/obj";
  // Host sources with g++ (fmt does not compile under nvcc), CUDA sources with nvcc, all at once;
  // then one link: everything static but cpp-httplib (Debian ships no archive of it) and cuBLAS. The
  // shared libraries the binary needs beyond libc and cuBLAS are copied into ENGINE_DIR/lib, which the
  // binary searches first (DT_RPATH, which also covers the libraries' own dependencies, unlike
  // DT_RUNPATH), so the engine directory runs wherever it is copied. cuBLAS (its Lt half alone is
  // ~500 MB) is the CUDA toolkit's on the machine that runs the engine: searched next in the build's
  // toolkit directory, then LD_LIBRARY_PATH.
  std::string compile = fmt::format("mkdir -p '{}'", obj), objects;
  // The engine's own sources, and the rocket-engine command line every engine binary has.
  std::vector<fs::path> sources = {fs::path(src) / "cli" / "rocket_engine.cc"};
  for (const auto& e : fs::directory_iterator(src + "/engine/h200")) sources.push_back(e.path());
  for (const fs::path& source : sources) {
    const std::string path = source.string(), o = obj + "/" + source.stem().string() + ".o";
    if (source.extension() == ".cc")
      compile += fmt::format(" && {{ '{}' -std=c++20 -O2 -DFMT_HEADER_ONLY -I'{}' -I'{}' -c '{}' -o '{}' & }}", ROCKET_CXX, src,
                             ROCKET_CUDA_INCLUDE, path, o);
    else if (source.extension() == ".cu")
      compile += fmt::format(" && {{ '{}' -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -DFMT_HEADER_ONLY -I'{}' -I'{}' "
                             "-c '{}' -o '{}' & }}", ROCKET_NVCC, engine_dir, src, path, o);
    else
      continue;
    objects += " '" + o + "'";
  }
  const std::string lib = engine_dir + "/lib";
  return fmt::format("set -e -o pipefail; {} && wait && for o in{}; do test -s \"$o\"; done && '{}' -gencode=arch=compute_90a,code=sm_90a "
                     "-cudart static -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc{} {} -o '{}' -lcpp-httplib -lprometheus-cpp-core -lpthread "
                     "-lcublas -ldl -lrt -Xlinker --disable-new-dtags -Xlinker -rpath -Xlinker '$ORIGIN/../lib:{}' && mkdir -p '{}' && "
                     "ldd '{}' | awk '$2 == \"=>\" && $3 ~ /^\\// {{print $3}}' | "
                     "{{ grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcublas(Lt)?)\\.so' || true; }} | "
                     "xargs -r cp -L -t '{}'",
                     compile, objects, ROCKET_NVCC, objects, ROCKET_H200_ENGINE_LINK, output, ROCKET_CUDA_LIB, lib, output, lib);
#else
  fail("build: this rocket was built without nvcc, so it cannot compile the h200 engine for {}", engine_dir);
#endif
}

}  // namespace rocket
