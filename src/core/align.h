// 64 KiB is the alignment quantum for blob offsets, file offsets (O_DIRECT), cache pages and copy
// descriptors (docs/doctrine.md). Constants inherited from 4 KiB-page code are wrong here.
#pragma once

#include <cstdint>

namespace rocket {

constexpr uint64_t kAlign = 64 * 1024;

constexpr uint64_t align_up(uint64_t n, uint64_t a = kAlign) { return (n + a - 1) / a * a; }
constexpr bool is_aligned(uint64_t n, uint64_t a = kAlign) { return n % a == 0; }

static_assert(align_up(1) == kAlign && align_up(kAlign) == kAlign && align_up(0) == 0);

}  // namespace rocket
