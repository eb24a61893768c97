// The library side of the FMA test, compiled with -mfma -mavx2 -ffp-contract=fast (-O3):
// format.hpp's inline quantizers get instantiated here with those flags.
#include <cmath>

#include "fma_iface.hpp"
#include "packfa/format.hpp"
#include "packfa/pack.hpp"

namespace fmatest {

void lib_q8_0_blocks(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n; ++b) packfa::q8_0_quantize_block(x + 32 * b, out + 34 * b);
}
void lib_q4_0_blocks(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n; ++b) packfa::q4_0_quantize_block(x + 32 * b, out + 18 * b);
}

bool lib_quantize_rows(int v_format, const float* x, int rows, int d, uint8_t* out, uint16_t* planar_scales) {
  const auto f = static_cast<packfa::VFormat>(v_format);
  packfa::QuantVParams p;
  p.n_tokens = rows;
  p.n_kv_heads = 1;
  p.head_dim = d;
  p.src_type = packfa::DType::f32;
  p.src = x;
  p.src_token_stride = d;
  p.src_head_stride = d;
  p.dst.format = f;
  p.dst.data = out;
  p.dst.strides.slot = p.dst.strides.head = packfa::v_row_bytes(f, d);
  if (f == packfa::VFormat::q8_0_planar) {
    p.dst.scales = planar_scales;
    p.dst.scale_strides.slot = p.dst.scale_strides.head = packfa::v_scale_row_bytes(f, d);
  }
  return packfa::quantize_v_host(p).ok();
}

// What q4_0_quantize_block was before the rounding barriers (commit 43650bd): the compiler
// may fuse x·id into the + 8.5.
void naive_q4_0_blocks(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n; ++b) {
    const float* v = x + 32 * b;
    uint8_t* blk = out + 18 * b;
    float amax = 0.0f, vmax = 0.0f;
    for (int i = 0; i < 32; ++i)
      if (amax < std::fabs(v[i])) {
        amax = std::fabs(v[i]);
        vmax = v[i];
      }
    const float d = vmax / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = packfa::fp16_from_float(d);
    blk[0] = static_cast<uint8_t>(h & 0xff);
    blk[1] = static_cast<uint8_t>(h >> 8);
    for (int j = 0; j < 16; ++j) {
      int n0 = static_cast<int>(v[j] * id + 8.5f), n1 = static_cast<int>(v[j + 16] * id + 8.5f);
      n0 = n0 < 15 ? n0 : 15;
      n1 = n1 < 15 ? n1 : 15;
      blk[2 + j] = static_cast<uint8_t>(n0 | (n1 << 4));
    }
  }
}

float madd(float a, float b, float c) { return a * b + c; }

}  // namespace fmatest
