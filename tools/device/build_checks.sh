#!/usr/bin/env bash
# Builds GPU check programs (tests/cuda/NAME_check.cu) as standalone binaries under .carry/checks/, so
# they run on the H200 machine with nothing but the CUDA driver: libstdc++, libgcc and cudart linked
# statically. The .cc sources a check needs compile with g++ (fmt does not compile under nvcc), the
# check itself with nvcc. One delimited block per check; each rebuilds its binary from scratch, so the
# script can run any number of times. Run from anywhere; needs nvcc and g++ on PATH.
#
#   bash tools/device/build_checks.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mkdir -p .carry/checks
# No engine.h: every check's kernel traits are sized for the committed H200 profile, as CMake does
# (kernels/cuda/booster.cuh).
profile() { grep -o "\"$1\": *[0-9]*" boosters/h200.json | grep -o '[0-9]*$'; }
booster=(-DROCKET_CHECK_BOOSTER_SMS="$(profile sm_count)" -DROCKET_CHECK_BOOSTER_SMEM_PER_BLOCK="$(profile smem_per_block_optin)"
         -DROCKET_CHECK_BOOSTER_L2_BYTES="$(profile l2_bytes)ull")

# ---- weight_load_check: src/engine/h200 arena, memory budget, weight loader -----------------------
(
  cuda_include=$(dirname "$(dirname "$(command -v nvcc)")")/include
  obj=.carry/checks/obj/weight_load_check
  rm -rf "$obj" && mkdir -p "$obj"
  for src in boosters/memory_budget engine/h200/blob_file engine/h200/arena engine/h200/device_budget engine/h200/weight_loader; do
    g++ -std=c++20 -O2 -Wall -Wextra -Wno-unused-parameter -Isrc -I"$cuda_include" -DFMT_HEADER_ONLY \
      -c "src/$src.cc" -o "$obj/$(basename "$src").o"
  done
  nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -Isrc -DFMT_HEADER_ONLY "${booster[@]}" \
    -Xcompiler -Wall,-Wextra,-Wno-unused-parameter -cudart static \
    -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
    tests/cuda/weight_load_check.cu "$obj"/*.o -o .carry/checks/weight_load_check -lpthread
  echo "built .carry/checks/weight_load_check"
)
# ---- end weight_load_check ------------------------------------------------------------------------

# ---- attention_check: paged gated attention, decode + prefill (src/kernels/cuda/attention_*.cuh) ----
(
  obj=.carry/checks/obj/attention_check
  rm -rf "$obj" && mkdir -p "$obj"
  # The host kernels' OpenMP pragmas stay off here (no libgomp on a bare machine); the check threads
  # its reference over rows itself.
  for src in kernels/host/attention kernels/host/rms_norm; do
    g++ -std=c++20 -O2 -Wall -Wextra -Wno-unknown-pragmas -Isrc -DFMT_HEADER_ONLY \
      -c "src/$src.cc" -o "$obj/$(basename "$src").o"
  done
  nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -Isrc -DFMT_HEADER_ONLY "${booster[@]}" \
    -Xcompiler -Wall,-Wextra -cudart static \
    -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
    tests/cuda/attention_check.cu "$obj"/*.o -o .carry/checks/attention_check -lpthread
  echo "built .carry/checks/attention_check"
)
# ---- end attention_check --------------------------------------------------------------------------

# ---- small decode kernels: rms_norm_check, gdn_check, router_check, sample_check ------------------
# (embedding + RMSNorm, conv1d + GDN, MoE router, argmax + sampler; src/kernels/cuda/*.cuh)
(
  build() {  # NAME then the host reference sources it links
    local name=$1 obj=.carry/checks/obj/$1
    shift
    rm -rf "$obj" && mkdir -p "$obj"
    for src in core/dtype "$@"; do
      g++ -std=c++20 -O2 -Wall -Wextra -Wno-unknown-pragmas -Isrc -DFMT_HEADER_ONLY \
        -c "src/$src.cc" -o "$obj/$(basename "$src").o"
    done
    nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -Isrc -DFMT_HEADER_ONLY "${booster[@]}" \
      -Xcompiler -Wall,-Wextra -cudart static \
      -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
      "tests/cuda/$name.cu" "$obj"/*.o -o ".carry/checks/$name" -lpthread
    echo "built .carry/checks/$name"
  }
  build rms_norm_check kernels/host/rms_norm
  build gdn_check kernels/host/conv1d kernels/host/gdn kernels/host/rms_norm
  build router_check kernels/host/moe
  build sample_check kernels/host/sample grammar/token_mask
)
# ---- end small decode kernels ---------------------------------------------------------------------

# ---- moe_check: MoE dispatch + grouped experts (src/kernels/cuda/moe_*.cuh) against host kernels ----
(
  obj=.carry/checks/obj/moe_check
  rm -rf "$obj" && mkdir -p "$obj"
  for src in core/dtype fuel/chemistry compiler/nvfp4_code kernels/host/dense kernels/host/weights kernels/host/moe; do
    g++ -std=c++20 -O2 -fopenmp -Wall -Wextra -Isrc -DFMT_HEADER_ONLY -c "src/$src.cc" -o "$obj/$(basename "$src").o"
  done
  # libgomp statically too: the GPU machine has only the CUDA driver.
  nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -Isrc -DFMT_HEADER_ONLY "${booster[@]}" -Xptxas -warn-spills \
    -Xcompiler -Wall,-Wextra,-fopenmp -cudart static -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
    tests/cuda/moe_check.cu "$obj"/*.o "$(g++ -print-file-name=libgomp.a)" -o .carry/checks/moe_check -lpthread -ldl
  echo "built .carry/checks/moe_check"
)
# ---- end moe_check --------------------------------------------------------------------------------

# ---- dense_check: bf16 dense projections on the tensor cores (src/kernels/cuda/dense.cuh) ---------
(
  obj=.carry/checks/obj/dense_check
  rm -rf "$obj" && mkdir -p "$obj"
  # host::linear's OpenMP pragmas stay off (no libgomp on a bare machine); the check threads its
  # reference over rows itself.
  for src in core/dtype kernels/host/dense kernels/host/weights; do
    g++ -std=c++20 -O2 -Wall -Wextra -Wno-unknown-pragmas -Isrc -DFMT_HEADER_ONLY \
      -c "src/$src.cc" -o "$obj/$(basename "$src").o"
  done
  nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -Isrc -DFMT_HEADER_ONLY "${booster[@]}" -Xptxas -warn-spills \
    -Xcompiler -Wall,-Wextra -cudart static \
    -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
    tests/cuda/dense_check.cu "$obj"/*.o -o .carry/checks/dense_check -lpthread
  echo "built .carry/checks/dense_check"
)
# ---- end dense_check ------------------------------------------------------------------------------

# ---- dense_fp8_check: block-FP8 dense projections (src/kernels/cuda/dense.cuh at kFP8Block) ---------
(
  obj=.carry/checks/obj/dense_fp8_check
  rm -rf "$obj" && mkdir -p "$obj"
  g++ -std=c++20 -O2 -Wall -Wextra -Isrc -DFMT_HEADER_ONLY -c src/core/dtype.cc -o "$obj/dtype.o"
  nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -Isrc -DFMT_HEADER_ONLY "${booster[@]}" -Xptxas -warn-spills \
    -Xcompiler -Wall,-Wextra -cudart static \
    -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
    tests/cuda/dense_fp8_check.cu "$obj"/*.o -o .carry/checks/dense_fp8_check -lpthread
  echo "built .carry/checks/dense_fp8_check"
)
# ---- end dense_fp8_check --------------------------------------------------------------------------

# ---- vision_tower_check: the vision tower (src/kernels/cuda/vision_tower.cuh) against vision::Tower ---
# cuBLAS is linked as a shared library (its static archive would not fit a call's carry): run it with
# the device's libcublas on LD_LIBRARY_PATH (tools/device/h200_engine.sh finds it).
(
  obj=.carry/checks/obj/vision_tower_check
  rm -rf "$obj" && mkdir -p "$obj"
  for src in core/dtype core/mapped_file fuel/vision_tower fuel/manifest fuel/fuel fuel/safetensors fuel/declared_precision fuel/chemistry \
             fuel/checkpoint_layout vision/tower vision/tower_positions kernels/host/dense kernels/host/weights \
             kernels/host/layer_norm kernels/host/attention; do
    g++ -std=c++20 -O2 -fopenmp -Wall -Wextra -Isrc -DFMT_HEADER_ONLY -c "src/$src.cc" -o "$obj/$(basename "$src").o"
  done
  g++ -std=c++20 -O2 -fopenmp -Wall -Wextra -Isrc -DFMT_HEADER_ONLY -c tests/cuda/vision_tower_reference.cc \
    -o "$obj/vision_tower_reference.o"
  nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -Isrc -DFMT_HEADER_ONLY "${booster[@]}" -Xptxas -warn-spills \
    -Xcompiler -Wall,-Wextra,-fopenmp -cudart static -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
    tests/cuda/vision_tower_check.cu "$obj"/*.o "$(g++ -print-file-name=libgomp.a)" -o .carry/checks/vision_tower_check \
    -lcublas -lpthread -ldl
  echo "built .carry/checks/vision_tower_check"
)
# ---- end vision_tower_check -----------------------------------------------------------------------

# ---- attention_flash_check: flash-attention prefill on the tensor cores (attention_flash.cuh) -----
# against today's prefill path; header-only on the host side (bf16 conversions are inline).
(
  nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -Isrc -DFMT_HEADER_ONLY "${booster[@]}" -Xptxas -warn-spills \
    -Xcompiler -Wall,-Wextra -cudart static \
    -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
    tests/cuda/attention_flash_check.cu -o .carry/checks/attention_flash_check -lpthread
  echo "built .carry/checks/attention_flash_check"
)
# ---- end attention_flash_check --------------------------------------------------------------------

# ---- gdn_chunked_check: chunked GDN over a prefill piece (src/kernels/cuda/gdn_chunked.cuh) ----------
(
  obj=.carry/checks/obj/gdn_chunked_check
  rm -rf "$obj" && mkdir -p "$obj"
  g++ -std=c++20 -O2 -Wall -Wextra -Isrc -DFMT_HEADER_ONLY -c src/core/dtype.cc -o "$obj/dtype.o"
  nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -Isrc -DFMT_HEADER_ONLY "${booster[@]}" -Xptxas -warn-spills \
    -Xcompiler -Wall,-Wextra -cudart static \
    -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
    tests/cuda/gdn_chunked_check.cu "$obj"/*.o -o .carry/checks/gdn_chunked_check -lpthread
  echo "built .carry/checks/gdn_chunked_check"
)
# ---- end gdn_chunked_check ------------------------------------------------------------------------

# ---- moe_piece_check: MoE block of a prefill piece (src/kernels/cuda/moe_piece.cuh) against the decode kernels ----
(
  obj=.carry/checks/obj/moe_piece_check
  rm -rf "$obj" && mkdir -p "$obj"
  for src in core/dtype fuel/chemistry compiler/nvfp4_code; do
    g++ -std=c++20 -O2 -Wall -Wextra -Wno-unknown-pragmas -Isrc -DFMT_HEADER_ONLY -c "src/$src.cc" -o "$obj/$(basename "$src").o"
  done
  nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Isrc -DFMT_HEADER_ONLY "${booster[@]}" -Xptxas -warn-spills \
    -Xcompiler -Wall,-Wextra -cudart static -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
    tests/cuda/moe_piece_check.cu "$obj"/*.o -o .carry/checks/moe_piece_check -lpthread
  echo "built .carry/checks/moe_piece_check"
)
# ---- end moe_piece_check --------------------------------------------------------------------------
