#!/usr/bin/env sh
# Registered by CMake in place of every CUDA test when the build was configured without nvcc, so the
# test summary says what did not run rather than passing without it: ctest lists this test as skipped
# (exit 77), and fails it where ROCKET_REQUIRE_CUDA=1 says the machine should have compiled them
# (.ci/run sets it where /usr/local/cuda/bin/nvcc exists).
echo "nvcc was not found when this build directory was configured: the CUDA sources, the GPU checks"
echo "(tests/cuda) and the H200 engine's builds (h200.build_tiny, h200.build_a3b) were neither compiled"
echo "nor tested. Install the CUDA toolkit (nvcc in /usr/local/cuda/bin or on PATH) and configure again."
if [ "${ROCKET_REQUIRE_CUDA:-0}" = 1 ]; then
  echo "FAIL ROCKET_REQUIRE_CUDA=1: this machine is meant to compile the CUDA sources"
  exit 1
fi
exit 77
