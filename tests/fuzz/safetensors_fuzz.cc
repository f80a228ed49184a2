// A safetensors shard as a downloaded checkpoint could hold it: the reader validates the header and
// the data layout and refuses anything else with an Error; a crash, a sanitizer report or a view
// outside the file is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "fuel/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader maps a file: write the input to one (tmpfs when the machine has it).
  static const std::string path = [] {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    return std::string(dir) + "/rocket_safetensors_fuzz." + std::to_string(getpid()) + ".safetensors";
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    const rocket::SafetensorsFile file(path);
    volatile uint64_t sum = 0;
    for (const auto& [name, view] : file.tensors()) {
      // Touch every byte of every view: one past the mapping faults.
      for (uint64_t i = 0; i < view.nbytes; ++i) sum = sum + view.data[i];
    }
  } catch (const rocket::Error&) {
  }
  return 0;
}
