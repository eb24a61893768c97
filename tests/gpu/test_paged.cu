// Paged KV caches (api.hpp PagedKV, device/kv_view.hpp) and engine score rules on the GPU.
//  - paged == contiguous, bitwise: the same keys in scrambled, shared pages of every page size,
//    NHD and HND, mixed lengths, every V format and both dot modes (static splits on both sides,
//    so the two runs do the same arithmetic in the same order);
//  - pack-on-write / quantize-on-write through a slot mapping with -1 entries write the host
//    packer's bytes at the mapped slots and nothing elsewhere;
//  - ggml ALiBi (slope · mask) and per-head masks against the fp64 reference;
//  - device-side values out of contract: clamped, counted, the context survives.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "device_problem.hpp"
#include "packfa/api.hpp"
#include "packfa/pack.hpp"
#include "packfa/reference.hpp"
#include "packfa/testing.hpp"
#include "packfa_catch.hpp"

using namespace packfa;
using namespace packfa::testing;

namespace {

int64_t align16(int64_t x) { return (x + 15) / 16 * 16; }

// One plane of a paged pool: [pages][page_size][G] (NHD) or [pages][G][page_size] (HND) rows
// of `row` bytes (16-byte padded), with its strides {page, slot, head}.
struct PagedPlane {
  std::vector<uint8_t> host;
  Strides strides;
  int64_t row = 0;
};

PagedPlane make_plane(int pages, int ps, int G, int64_t row_bytes, bool hnd) {
  PagedPlane pl;
  pl.row = align16(row_bytes);
  pl.host.assign(static_cast<size_t>(pages) * ps * G * pl.row, 0xA5);
  if (hnd)
    pl.strides = {G * ps * pl.row, pl.row, ps * pl.row};
  else
    pl.strides = {ps * G * pl.row, G * pl.row, pl.row};
  return pl;
}

// Copies key j of sequence b (head g) from a flat host plane into its page.
void place(PagedPlane& pl, const uint8_t* flat, const Strides& fs, int64_t row_bytes, int b, int j, int g, int page,
           int ps) {
  std::memcpy(pl.host.data() + page * pl.strides.seq + (j % ps) * pl.strides.slot + g * pl.strides.head,
              flat + b * fs.seq + j * fs.slot + g * fs.head, row_bytes);
}

struct PagedCase {
  int D = 128, page = 32, G = 2, H = 8, nq = 1;
  bool hnd = false;
  VFormat vf = VFormat::q8_0;
  DotMode dot = DotMode::int8;
  KFormat kf = KFormat::packed16;
  std::vector<int> lens = {700, 33, 1500};
  int window = 0;
  bool mask = false;
  int splits = 0;  // > 0: this many splits, long enough that work moves between them (claims)
};

// Runs the case on the contiguous cache and on a paged copy; both outputs must agree bitwise
// (with claim counters, pc.splits: within fp32 reordering, since which wave takes a claimed
// chunk varies from run to run).
void check_paged(const PagedCase& pc, uint64_t seed) {
  ProblemConfig c;
  c.head_dim = pc.D;
  c.v_format = pc.vf;
  c.k_format = pc.kf;
  c.dot = pc.dot;
  c.nq = pc.nq;
  c.n_q_heads = pc.H;
  c.n_kv_heads = pc.G;
  c.batch = static_cast<int>(pc.lens.size());
  c.kv_lens = pc.lens;
  c.kv_len = *std::max_element(pc.lens.begin(), pc.lens.end());
  c.k_block = pc.D % 32 == 0 ? 32 : 16;
  c.window = pc.window;
  c.mask = pc.mask;
  c.o_type = DType::f32;
  c.seed = seed;
  HostProblem hp;
  REQUIRE(make_problem(c, &hp).ok());

  const int B = c.batch, ps = pc.page, G = pc.G;
  // sequence 1 starts with sequence 0's first two pages (prefix caching): same bytes in the
  // flat cache, the same physical pages in the table
  const int shared = std::min({2 * ps, pc.lens[0], B > 1 ? pc.lens[1] : 0}) / ps;
  auto share_rows = [&](aligned_vector<uint8_t>& plane, const Strides& s, int64_t row_bytes) {
    for (int j = 0; j < shared * ps; ++j)
      for (int g = 0; g < G; ++g)
        std::memcpy(plane.data() + 1 * s.seq + j * s.slot + g * s.head, plane.data() + j * s.slot + g * s.head,
                    row_bytes);
  };
  const int vi = static_cast<int>(pc.vf);
  const bool packed = pc.kf == KFormat::packed16;
  const int64_t k_row = packed ? pc.D : 2 * pc.D, ks_row = 2 * pc.D / c.k_block;
  const int64_t v_row = v_row_bytes(pc.vf, pc.D), vs_row = v_scale_row_bytes(pc.vf, pc.D);
  aligned_vector<uint8_t>& kflat = packed ? hp.k_payload : hp.k_f16;
  const Strides kfs = packed ? hp.k_payload_strides : hp.k_f16_strides;
  if (B > 1 && shared > 0) {
    share_rows(kflat, kfs, k_row);
    if (packed) share_rows(hp.k_scales, hp.k_scale_strides, ks_row);
    share_rows(hp.v_planes[vi], hp.v_strides[vi], v_row);
    if (pc.vf == VFormat::q8_0_planar) share_rows(hp.v_scale_plane, hp.v_scale_strides, vs_row);
  }

  // block table: every page of every sequence, scrambled; shared pages appear twice
  int max_pages = 0, total = 0;
  for (int L : pc.lens) {
    max_pages = std::max(max_pages, (L + ps - 1) / ps);
    total += (L + ps - 1) / ps;
  }
  const int pool = total + 3;  // a few pages nobody uses
  std::vector<int32_t> perm(pool);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table(static_cast<size_t>(B) * (max_pages + 1), -7);  // a padded row: -7 is never read
  const int tstride = max_pages + 1;
  int next = 0;
  for (int b = 0; b < B; ++b)
    for (int pg = 0; pg < (pc.lens[b] + ps - 1) / ps; ++pg)
      table[b * tstride + pg] = (b == 1 && pg < shared) ? table[pg] : perm[next++];

  PagedPlane kp = make_plane(pool, ps, G, k_row, pc.hnd), ksp = make_plane(pool, ps, G, ks_row, pc.hnd);
  PagedPlane vp = make_plane(pool, ps, G, v_row, pc.hnd), vsp = make_plane(pool, ps, G, vs_row ? vs_row : 2, pc.hnd);
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < pc.lens[b]; ++j)
      for (int g = 0; g < G; ++g) {
        const int page = table[b * tstride + j / ps];
        place(kp, kflat.data(), kfs, k_row, b, j, g, page, ps);
        if (packed) place(ksp, hp.k_scales.data(), hp.k_scale_strides, ks_row, b, j, g, page, ps);
        place(vp, hp.v_planes[vi].data(), hp.v_strides[vi], v_row, b, j, g, page, ps);
        if (vs_row) place(vsp, hp.v_scale_plane.data(), hp.v_scale_strides, vs_row, b, j, g, page, ps);
      }

  DeviceProblem dp(hp, pc.kf, pc.vf);
  dp.params.num_splits = pc.splits;
  KernelChoice flat_choice;
  REQUIRE(select_kernel(dp.params, 0, &flat_choice).ok());
  // static splits: the same chunk order in both runs; claims: waves take chunks out of order
  // and from other splits, so the table window (kv_view.hpp) is reloaded backwards too
  REQUIRE(flat_choice.claims == (pc.splits > 0));
  REQUIRE(flat_choice.layout == "contiguous");
  REQUIRE(fa_packed16_forward(dp.params, nullptr).ok());
  CUDA_CHECK(cudaDeviceSynchronize());
  const int64_t n = static_cast<int64_t>(B) * c.nq * c.n_q_heads * c.head_dim;
  const std::vector<double> o_flat = download(DType::f32, dp.params.o.data, n);
  const std::vector<double> lse_flat = download(DType::f32, dp.params.lse, static_cast<int64_t>(hp.lse.size()));

  std::vector<DeviceBuffer> bufs;
  auto up = [&](const void* host, size_t bytes) {
    bufs.emplace_back(bytes);
    CUDA_CHECK(cudaMemcpy(bufs.back().ptr, host, bytes, cudaMemcpyHostToDevice));
    return bufs.back().ptr;
  };
  AttnParams p = dp.params;
  p.k.data = up(kp.host.data(), kp.host.size());
  p.k.data_strides = kp.strides;
  if (packed) {
    p.k.scales = up(ksp.host.data(), ksp.host.size());
    p.k.scale_strides = ksp.strides;
  }
  p.v.data = up(vp.host.data(), vp.host.size());
  p.v.strides = vp.strides;
  if (vs_row) {
    p.v.scales = up(vsp.host.data(), vsp.host.size());
    p.v.scale_strides = vsp.strides;
  }
  p.paged.block_table = static_cast<const int32_t*>(up(table.data(), table.size() * 4));
  p.paged.table_stride = tstride;
  p.paged.page_size = ps;
  p.paged.num_pages = pool;
  DeviceBuffer errs(16);
  CUDA_CHECK(cudaMemset(errs.ptr, 0, 16));
  p.errors = errs.as<int>();
  dp.poison_output(hp);
  KernelChoice paged_choice;
  REQUIRE(select_kernel(p, 0, &paged_choice).ok());
  CHECK(paged_choice.layout == "paged" + std::to_string(ps));
  REQUIRE(paged_choice.num_splits == flat_choice.num_splits);
  REQUIRE(paged_choice.claims == flat_choice.claims);
  const Status st = fa_packed16_forward(p, nullptr);
  INFO(st.to_string());
  REQUIRE(st.ok());
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<double> o_paged = download(DType::f32, p.o.data, n);
  const std::vector<double> lse_paged = download(DType::f32, p.lse, static_cast<int64_t>(hp.lse.size()));
  int host_errs[4];
  CUDA_CHECK(cudaMemcpy(host_errs, errs.ptr, 16, cudaMemcpyDeviceToHost));
  INFO("D=" << pc.D << " page=" << ps << (pc.hnd ? " HND" : " NHD") << " V=" << vi << " dot=" << int(pc.dot)
            << " kf=" << int(pc.kf) << " window=" << pc.window << " kernel=" << paged_choice.name
            << " splits=" << paged_choice.num_splits);
  CHECK(host_errs[0] == 0);
  CHECK(host_errs[1] == 0);
  CHECK(host_errs[2] == 0);
  if (pc.splits > 0) {
    // claims: the same sums in another order, so not bitwise: a chunk's P is rounded to fp16
    // for the P·V relative to the running maximum of whichever wave took it (~2^-11 a term:
    // up to ~5e-4 relative L2 over outputs that average 20k random V rows). One chunk of 32
    // keys from a wrong page (pages are scrambled) moves its rows by ~32 / 20k of a V row,
    // against O ~ 1 / sqrt(20k) of one: ~0.1 relative L2 over the output, and the LSE by ~1e-3
    // (the LSE sums fp32 P: reordering moves it ~1e-6).
    const double e = rel_err(o_paged, o_flat);
    double lse_d = 0;
    for (size_t i = 0; i < lse_flat.size(); ++i) lse_d = std::max(lse_d, std::fabs(lse_flat[i] - lse_paged[i]));
    INFO("relative L2 error " << e << ", LSE max difference " << lse_d);
    CHECK(e <= 5e-3);
    CHECK(lse_d <= 1e-4);
    return;
  }
  int diff = 0;
  for (int64_t i = 0; i < n; ++i) diff += std::memcmp(&o_flat[i], &o_paged[i], sizeof(double)) != 0;
  for (size_t i = 0; i < lse_flat.size(); ++i) diff += std::memcmp(&lse_flat[i], &lse_paged[i], sizeof(double)) != 0;
  CHECK(diff == 0);
}

}  // namespace

TEST_CASE("paged == contiguous, bitwise: page sizes x NHD/HND x V formats x dot modes", "[paged]") {
  uint64_t seed = 9000;
  for (int ps : {16, 32, 64, 128, 256})
    for (bool hnd : {false, true})
      for (VFormat vf : {VFormat::f16, VFormat::bf16, VFormat::q8_0, VFormat::q4_0, VFormat::q8_0_planar})
        for (DotMode dot : {DotMode::int8, DotMode::f16}) {
          PagedCase pc;
          pc.page = ps;
          pc.hnd = hnd;
          pc.vf = vf;
          pc.dot = dot;
          check_paged(pc, ++seed);
        }
}

TEST_CASE("paged: f16 K, head dims, MTP rows, windows and masks", "[paged]") {
  uint64_t seed = 9500;
  for (int D : {64, 80, 256}) {
    PagedCase pc;
    pc.D = D;
    pc.vf = D % 32 ? VFormat::f16 : VFormat::q8_0;
    pc.page = 16;
    check_paged(pc, ++seed);
    pc.kf = KFormat::f16;
    pc.page = 64;
    check_paged(pc, ++seed);
  }
  PagedCase pc;
  pc.nq = 4;
  pc.page = 16;
  pc.window = 97;  // a window start inside a page
  pc.mask = true;
  check_paged(pc, ++seed);
  pc.H = 32;
  pc.G = 2;  // 16-row class
  pc.nq = 1;
  pc.hnd = true;
  check_paged(pc, ++seed);
}

TEST_CASE("paged with claim counters: windows of page ids reloaded out of order", "[paged]") {
  // Two splits a sequence, each ~10k keys: 75% of every split's chunks are claimed and stolen
  // (device/chunk_source.hpp), so a wave's chunks jump between splits; pages of 16 hold 512
  // keys a window, pages of 256 the whole sequence in one window or two.
  uint64_t seed = 9700;
  for (int ps : {16, 64, 256})
    for (VFormat vf : {VFormat::q8_0, VFormat::f16}) {
      PagedCase pc;
      pc.page = ps;
      pc.vf = vf;
      pc.lens = {20000, 13000};
      pc.splits = 2;
      pc.hnd = ps == 64;
      check_paged(pc, ++seed);
    }
}

// pack_k_packed16 / quantize_v into a paged pool through a slot mapping with -1 entries:
// each mapped slot holds the host packer's bytes for its token, every other byte is untouched.
TEST_CASE("pack/quantize-on-write through a vLLM slot mapping (page tables, -1 = skip)", "[paged][pack]") {
  const int D = 128, G = 2, T = 70;
  for (int ps : {16, 64})
    for (bool hnd : {false, true}) {
      ProblemConfig c;
      c.head_dim = D;
      c.n_q_heads = 4;
      c.n_kv_heads = G;
      c.kv_len = T;
      c.seed = 77 + ps + hnd;
      HostProblem hp;  // its planes hold the host packer's output for tokens 0..T-1
      REQUIRE(make_problem(c, &hp).ok());
      const int pages = (T + ps - 1) / ps + 4;
      std::vector<int32_t> slots(T);
      std::vector<int32_t> perm(pages * ps);
      std::iota(perm.begin(), perm.end(), 0);
      std::mt19937 rng(5 + ps);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int t = 0; t < T; ++t) slots[t] = t % 9 == 4 ? -1 : perm[t];
      // source rows [token][G][D] f16 from the true K / V values
      std::vector<uint16_t> ksrc(T * G * D), vsrc(T * G * D);
      for (int t = 0; t < T; ++t)
        for (int g = 0; g < G; ++g)
          for (int d = 0; d < D; ++d) {
            ksrc[(t * G + g) * D + d] = fp16_from_float(hp.k_values[((0 * hp.capacity + t) * G + g) * D + d]);
            vsrc[(t * G + g) * D + d] = fp16_from_float(hp.v_values[((0 * hp.capacity + t) * G + g) * D + d]);
          }
      PagedPlane kp = make_plane(pages, ps, G, D, hnd), ksp = make_plane(pages, ps, G, 2 * D / 32, hnd);
      PagedPlane vp = make_plane(pages, ps, G, v_row_bytes(VFormat::q8_0, D), hnd);
      DeviceBuffer dk(kp.host.size()), dks(ksp.host.size()), dv(vp.host.size()), dsl(T * 4), dksrc(ksrc.size() * 2),
          dvsrc(vsrc.size() * 2);
      CUDA_CHECK(cudaMemcpy(dk.ptr, kp.host.data(), kp.host.size(), cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(dks.ptr, ksp.host.data(), ksp.host.size(), cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(dv.ptr, vp.host.data(), vp.host.size(), cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(dsl.ptr, slots.data(), T * 4, cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(dksrc.ptr, ksrc.data(), ksrc.size() * 2, cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(dvsrc.ptr, vsrc.data(), vsrc.size() * 2, cudaMemcpyHostToDevice));
      PackKParams pk;
      pk.n_tokens = T;
      pk.n_kv_heads = G;
      pk.head_dim = D;
      pk.src = dksrc.ptr;
      pk.src_token_stride = G * D;
      pk.src_head_stride = D;
      pk.dst.data = dk.ptr;
      pk.dst.data_strides = kp.strides;
      pk.dst.scales = dks.ptr;
      pk.dst.scale_strides = ksp.strides;
      pk.slots = dsl.as<int32_t>();
      pk.page_size = ps;
      pk.n_slots = static_cast<int64_t>(pages) * ps;
      REQUIRE(pack_k_packed16(pk, nullptr).ok());
      QuantVParams qv;
      qv.n_tokens = T;
      qv.n_kv_heads = G;
      qv.head_dim = D;
      qv.src = dvsrc.ptr;
      qv.src_token_stride = G * D;
      qv.src_head_stride = D;
      qv.dst.format = VFormat::q8_0;
      qv.dst.data = dv.ptr;
      qv.dst.strides = vp.strides;
      qv.slots = dsl.as<int32_t>();
      qv.page_size = ps;
      qv.n_slots = static_cast<int64_t>(pages) * ps;
      REQUIRE(quantize_v(qv, nullptr).ok());
      CUDA_CHECK(cudaDeviceSynchronize());
      // expected: the untouched pool with the host packer's rows at the mapped slots
      const int vq = static_cast<int>(VFormat::q8_0);
      for (int t = 0; t < T; ++t) {
        if (slots[t] < 0) continue;
        const int page = slots[t] / ps, in = slots[t] % ps;
        for (int g = 0; g < G; ++g) {
          auto put = [&](PagedPlane& pl, const aligned_vector<uint8_t>& flat, const Strides& fs, int64_t bytes) {
            std::memcpy(pl.host.data() + page * pl.strides.seq + in * pl.strides.slot + g * pl.strides.head,
                        flat.data() + t * fs.slot + g * fs.head, bytes);
          };
          put(kp, hp.k_payload, hp.k_payload_strides, D);
          put(ksp, hp.k_scales, hp.k_scale_strides, 2 * D / 32);
          put(vp, hp.v_planes[vq], hp.v_strides[vq], v_row_bytes(VFormat::q8_0, D));
        }
      }
      auto same = [&](const PagedPlane& pl, const DeviceBuffer& d) {
        std::vector<uint8_t> got(pl.host.size());
        CUDA_CHECK(cudaMemcpy(got.data(), d.ptr, got.size(), cudaMemcpyDeviceToHost));
        return got == pl.host;
      };
      INFO("page=" << ps << (hnd ? " HND" : " NHD"));
      CHECK(same(kp, dk));
      CHECK(same(ksp, dks));
      CHECK(same(vp, dv));
    }
}

TEST_CASE("ggml ALiBi (slope · mask) and per-head masks on the GPU == the fp64 reference", "[ggml]") {
  for (DotMode dot : {DotMode::int8, DotMode::f16})
    for (int H : {8, 32}) {  // 4-row and 16-row classes (the tensor-core and lane paths)
      ProblemConfig c;
      c.head_dim = 128;
      c.v_format = VFormat::q8_0;
      c.n_q_heads = H;
      c.n_kv_heads = 2;
      c.nq = 3;
      c.kv_len = 900;
      c.o_type = DType::f32;
      c.causal = true;
      c.dot = dot;
      c.alibi_max_bias = 8.0f;
      c.seed = 4242 + H + int(dot);
      HostProblem hp;
      REQUIRE(make_problem(c, &hp).ok());
      // llama.cpp's ALiBi mask: -|p_i - p_j| for visible keys, per head a different scale of it
      // (per-head masks: [head][row][key])
      const int C = hp.capacity, NQ = c.nq;
      std::vector<uint16_t> mask(static_cast<size_t>(H) * NQ * C);
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < NQ; ++i) {
          const int pos = c.kv_len - NQ + i;
          for (int j = 0; j < C; ++j)
            mask[(static_cast<size_t>(h) * NQ + i) * C + j] =
                j <= pos ? fp16_from_float(-static_cast<float>(std::abs(pos - j)) * (1 + (h % 3)) / 8.0f) : 0xfc00;
        }
      AttnParams hparams = hp.params;
      hparams.mask = mask.data();
      hparams.mask_row_stride = C;
      hparams.mask_seq_stride = 0;
      hparams.mask_head_stride = static_cast<int64_t>(NQ) * C;
      hparams.alibi_mode = AlibiMode::ggml;
      std::vector<double> ref_o, ref_lse;
      REQUIRE(reference_attention(hparams, dot == DotMode::int8 ? RefMode::kernel_int8 : RefMode::kernel_f16, &ref_o,
                                  &ref_lse)
                  .ok());
      DeviceProblem dp(hp, c.k_format, c.v_format);
      DeviceBuffer dmask(mask.size() * 2);
      CUDA_CHECK(cudaMemcpy(dmask.ptr, mask.data(), mask.size() * 2, cudaMemcpyHostToDevice));
      AttnParams p = dp.params;
      p.mask = dmask.as<uint16_t>();
      p.mask_row_stride = C;
      p.mask_seq_stride = 0;
      p.mask_head_stride = static_cast<int64_t>(NQ) * C;
      p.alibi_mode = AlibiMode::ggml;
      REQUIRE(fa_packed16_forward(p, nullptr).ok());
      CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<double> o = download(DType::f32, p.o.data, static_cast<int64_t>(ref_o.size()));
      const double err = rel_err(o, ref_o);
      INFO("H=" << H << " dot=" << int(dot) << " err=" << err);
      CHECK(err <= 1e-3);
    }
}

TEST_CASE("device-side values out of contract: clamped, counted, context alive", "[robust]") {
  ProblemConfig c;
  c.head_dim = 128;
  c.v_format = VFormat::q8_0;
  c.batch = 3;
  c.kv_lens = {300, 200, 100};
  c.kv_len = 300;
  c.explicit_q_pos = true;
  c.nq = 2;
  c.o_type = DType::f32;
  c.seed = 31337;
  HostProblem hp;
  REQUIRE(make_problem(c, &hp).ok());
  DeviceProblem dp(hp, c.k_format, c.v_format);
  // kv_len: one above max_kv_len, one negative; q_pos: one negative, one beyond kv_len
  const int32_t lens[3] = {hp.max_kv_len + 1000, -5, 100};
  const int32_t pos[6] = {10, 20, -3, 0, 99, 5000};
  CUDA_CHECK(cudaMemcpy(const_cast<int32_t*>(dp.params.kv_len), lens, sizeof lens, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(const_cast<int32_t*>(dp.params.q_pos), pos, sizeof pos, cudaMemcpyHostToDevice));
  DeviceBuffer errs(16);
  CUDA_CHECK(cudaMemset(errs.ptr, 0, 16));
  AttnParams p = dp.params;
  p.errors = errs.as<int>();
  REQUIRE(fa_packed16_forward(p, nullptr).ok());
  CUDA_CHECK(cudaDeviceSynchronize());  // throws if the context were lost
  int e[4];
  CUDA_CHECK(cudaMemcpy(e, errs.ptr, 16, cudaMemcpyDeviceToHost));
  CHECK(e[0] == 2);  // two lengths clamped
  // positions after clamping kv_len to {max, 0, 100}: row (1, 0) -3 and (1, 1) 0 are both out
  // of [0, 0); (2, 1) 5000 is out of [0, 100)
  CHECK(e[1] == 3);
  CHECK(e[2] == 0);
  // the clamped call equals the in-contract one: kv_len {max, 0, 100}, q_pos clamped into [-1, kv_len]
  const int32_t lens2[3] = {hp.max_kv_len, 0, 100};
  const int32_t pos2[6] = {10, 20, -1, 0, 99, 100};
  std::vector<double> o1 = download(DType::f32, p.o.data, static_cast<int64_t>(hp.o.size() / 4));
  CUDA_CHECK(cudaMemcpy(const_cast<int32_t*>(dp.params.kv_len), lens2, sizeof lens2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(const_cast<int32_t*>(dp.params.q_pos), pos2, sizeof pos2, cudaMemcpyHostToDevice));
  p.errors = nullptr;
  REQUIRE(fa_packed16_forward(p, nullptr).ok());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> o2 = download(DType::f32, p.o.data, static_cast<int64_t>(hp.o.size() / 4));
  CHECK(o1 == o2);

  // a page id outside the pool: counted, reads stay inside the pool
  const int ps = 32;
  std::vector<int32_t> table = {0, 1, 99, 3, 4, 5, 6, 7, 8, 9};  // seq 0 page 2 is bad
  DeviceBuffer dt(table.size() * 4);
  CUDA_CHECK(cudaMemcpy(dt.ptr, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(errs.ptr, 0, 16));
  AttnParams q = dp.params;
  q.batch = 1;
  q.max_kv_len = 300;
  q.paged.block_table = dt.as<int32_t>();
  q.paged.table_stride = 10;
  q.paged.page_size = ps;
  q.paged.num_pages = 10;  // the flat plane read as 10 pages of 32 slots (seq strides -> page strides)
  q.k.data_strides.seq = 32 * hp.k_payload_strides.slot;
  q.k.scale_strides.seq = 32 * hp.k_scale_strides.slot;
  q.v.strides.seq = 32 * hp.v_strides[static_cast<int>(VFormat::q8_0)].slot;
  q.errors = errs.as<int>();
  q.q_pos = nullptr;  // rows at 298, 299: every page is read
  const int32_t len300[1] = {300};
  CUDA_CHECK(cudaMemcpy(const_cast<int32_t*>(q.kv_len), len300, 4, cudaMemcpyHostToDevice));
  REQUIRE(fa_packed16_forward(q, nullptr).ok());
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(e, errs.ptr, 16, cudaMemcpyDeviceToHost));
  CHECK(e[2] > 0);
}
