// CUBLAS_CHECK(call): every cuBLAS call goes through it. A failure throws rocket::Error naming the
// call, the file and line, and cuBLAS's status name and string, as CUDA_CHECK does for the runtime.
#pragma once

#include <cublas_v2.h>

#include <string>

#include "core/error.h"

namespace rocket::cuda {

inline void cublas_check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw Error(std::string("cuBLAS error at ") + file + ":" + std::to_string(line) + ": " + call + " failed: " +
              cublasGetStatusName(s) + " (" + cublasGetStatusString(s) + ")");
}

}  // namespace rocket::cuda

#define CUBLAS_CHECK(call) ::rocket::cuda::cublas_check((call), #call, __FILE__, __LINE__)
