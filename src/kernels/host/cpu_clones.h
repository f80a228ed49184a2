// ROCKET_CPU_CLONES: a hot host loop compiled twice, for x86-64-v3 (AVX2, FMA) and the baseline; an
// ifunc resolver picks one by CPU feature when the binary loads, so machines without AVX2 still run.
#pragma once

// ThreadSanitizer instruments the resolver too, and the resolver runs during relocation, before the
// TSan runtime is up: the binary died before main (`rocket --help`, a thread-sanitized build). That
// build keeps the baseline clone alone.
#if defined(__SANITIZE_THREAD__)
#define ROCKET_CPU_CLONES
#else
#define ROCKET_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
