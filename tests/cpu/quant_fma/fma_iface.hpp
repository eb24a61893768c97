// Between the reference TU (fma_main.cpp, contraction off, baseline ISA) and the library TU
// (fma_lib.cpp + src/cpu/pack.cpp, built with -mfma -mavx2 -ffp-contract=fast): plain
// declarations only. No inline function may be compiled into both: the linker keeps one
// copy of an inline symbol, whichever flags built it.
#pragma once

#include <cstdint>

namespace fmatest {

// The library's quantizers as the flagged TUs compile them, n blocks of 32 floats each:
// format.hpp's block functions called directly, and quantize_v_host (src/cpu/pack.cpp) over
// rows of d values.
void lib_q8_0_blocks(const float* x, int64_t n, uint8_t* out /*34 per block*/);
void lib_q4_0_blocks(const float* x, int64_t n, uint8_t* out /*18 per block*/);
bool lib_quantize_rows(int v_format /*2 q8_0, 3 q4_0, 4 q8_0_planar*/, const float* x, int rows, int d,
                       uint8_t* out, uint16_t* planar_scales);
// The pre-fix q4_0 nibble (x·id + 8.5 written as one expression): shows the flags do fuse.
void naive_q4_0_blocks(const float* x, int64_t n, uint8_t* out);
// a·b + c as the flagged TU compiles it (one rounding when fused).
float madd(float a, float b, float c);

}  // namespace fmatest
