// CUDA_CHECK(call): every CUDA runtime call goes through it; CUDA_CHECK_LAUNCH() follows every kernel
// launch. A failure throws rocket::Error naming the call, the file and line, and CUDA's error name and
// string.
//
// NOTE: it throws rather than aborts (CHECK aborts) so startup code (probe, countdown) can report the
// failure at the CLI boundary and refuse cleanly. Once a kernel has faulted the context is unusable
// (sticky error), so code in the step loop lets the Error propagate and end the process.
// Composes its message with std::string: fmt is not available in CUDA translation units (error.h).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace rocket {

inline void cuda_check(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return;
  throw Error(std::string("CUDA error at ") + file + ":" + std::to_string(line) + ": " + call + " failed: " +
              cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace rocket

#define CUDA_CHECK(call) ::rocket::cuda_check((call), #call, __FILE__, __LINE__)
#define CUDA_CHECK_LAUNCH() ::rocket::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
