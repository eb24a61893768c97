// bench/packfa_bench.cu — decode / MTP sweeps of fa_packed16_forward.
//
// For every case: the device time of one call (split + combine and the launch gap in front,
// median of >= 50 event-timed runs after warm-up, see run()), the bytes a perfect kernel must
// move (K payload + scales + V of every visible key, Q, O), GB/s, % of a device-to-device
// copy measured in this run, and the ratio against the in-house f16-K kernel (same template,
// plain fp16 K) on the same shape and V format. Inputs are random (never zeros) and rotate
// among enough copies to exceed the L2 cache. A one-block spin kernel (~40 us) runs before
// each call, so the host has enqueued the call before the GPU reaches it: the events time
// device work, not host launch latency. Also the pack -> attention -> combine chain
// with/without PDL and in and out of a CUDA graph (issue 5, bench 8c). --trace (builds with
// PACKFA_TRACE): a per-block timeline of one more call (include/packfa/device/trace.hpp).
// --prefill (issue 17): instead of the decode sweep, prefill chunks (nq 512 / 2048 new rows
// after a cached prefix of kv - nq keys, or non-causal over all kv keys), timed the same way,
// with TFLOP/s = 4 · D · heads · (visible (row, key) pairs) / t: nq · kv pairs non-causal,
// nq · kv − nq (nq − 1) / 2 causal (the rows are the last nq positions).
//
//   packfa-bench [--json PATH] [--quick] [--reps N] [--chain-only] [--kv N] [--nq N] [--d N]
//                [--v f16|q8_0|q4_0|q8_0_planar] [--no-baseline] [--splits N] [--trace]
//                [--head-major] [--prefill [--causal on|off]]
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "../src/cli/args.hpp"  // strict option parsing, shared with packfa-cli
#include "packfa/api.hpp"
#include "packfa/format.hpp"
#if defined(PACKFA_TRACE)
#include "packfa/device/trace.hpp"
namespace packfa::detail {
extern unsigned long long* g_trace;  // src/dispatch.cu (PACKFA_TRACE builds)
}
#endif

#ifndef PACKFA_COMMIT
#define PACKFA_COMMIT "unknown"
#endif

using namespace packfa;

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));       \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
#define PK(x)                                                                          \
  do {                                                                                 \
    Status s_ = (x);                                                                   \
    if (!s_.ok()) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_.to_string().c_str()); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

namespace {

int g_splits = 0;  // --splits N: force the split-KV count (0 = the dispatcher's choice)
bool g_trace = false;  // --trace (PACKFA_TRACE builds): per-block timeline of one more call
// --head-major: each KV head's rows contiguous ([seq][head][slot]) instead of llama.cpp's
// token-major cache ([seq][slot][head], the default); the same bytes, another DRAM order
bool g_head_major = false;
// --paged N: the same token-major cache read as pages of N slots through a scrambled block
// table (api.hpp PagedKV): page stride N slots, sequence b's pages anywhere in the pool.
int g_paged = 0;

__device__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// Keeps the stream busy for about `ns` nanoseconds (one block).
__global__ void spin_kernel(long long ns) {
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns) break;
  }
}

#if defined(PACKFA_TRACE)
// The same, then the global timer at its end into *end (the trace's launch-gap reference).
__global__ void spin_stamp_kernel(long long ns, unsigned long long* end) {
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
  *end = static_cast<unsigned long long>(t);
}
#endif

// kind 0: random int8 in [-127,127]; 1: fp16 scales ~0.01..0.05; 2: fp16 N(0,1)-ish;
// 3: q8_0 blocks; 4: q4_0 blocks.
__global__ void fill_kernel(uint8_t* p, size_t n, int kind, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint32_t h = hash32(seed * 0x9E3779B97F4A7C15ULL + i);
    uint8_t v = static_cast<uint8_t>(h);
    if (kind == 0) v = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(h % 255) - 127));
    if (kind == 1 || kind == 2 || kind == 3 || kind == 4) {
      const size_t blk = kind == 3 ? 34 : 18;
      const bool scale_byte = (kind >= 3) ? (i % blk) < 2 : (kind == 1);
      if (scale_byte || kind == 2) {
        // fp16 little-endian: low byte random mantissa, high byte exponent 0x20..0x23 (~0.01..0.05)
        // kind 2 (f16 values): high byte 0x38..0x3b (0.5..1) with random sign.
        const bool hi = (kind >= 3) ? (i % blk) == 1 : (i & 1);
        if (hi) v = kind == 2 ? static_cast<uint8_t>(0x38 | (h & 3) | (h & 0x80)) : static_cast<uint8_t>(0x20 | (h & 3));
      }
    }
    p[i] = v;
  }
}

void fill(void* p, size_t n, int kind, uint64_t seed) {
  fill_kernel<<<1024, 256>>>(static_cast<uint8_t*>(p), n, kind, seed);
  CK(cudaGetLastError());
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Device-to-device copy GB/s (bytes read + written), median of several copies of 1 GiB.
double copy_bandwidth() {
  const size_t n = size_t{1} << 30;
  void *a, *b;
  CK(cudaMalloc(&a, n));
  CK(cudaMalloc(&b, n));
  fill(a, n, 0, 1);
  Timer t;
  std::vector<double> gbs;
  for (int i = 0; i < 25; ++i) {
    CK(cudaEventRecord(t.a));
    CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(t.b));
    CK(cudaEventSynchronize(t.b));
    float ms;
    CK(cudaEventElapsedTime(&ms, t.a, t.b));
    if (i >= 5) gbs.push_back(2.0 * n / (ms * 1e-3) / 1e9);
  }
  CK(cudaFree(a));
  CK(cudaFree(b));
  return median(gbs);
}

struct Case {
  int D, H, G, nq, batch;
  int kv;  // max kv length
  VFormat vf;
  KFormat kf;
  DotMode dot = DotMode::int8;
  bool causal = true;  // the decode sweep runs causal (AttnParams' default); prefill rows both ways
};

struct Measured {
  double us = 0, bytes = 0, gbs = 0;
  double flops = 0;     // 4 · D · heads · visible (row, key) pairs
  double tflops = 0;
  double us_event = 0;  // the session-1..3 figure: events right around the call (see run())
  int splits = 0;
  std::string kernel;
  std::string plan;  // row groups, combine kernel, claims, decode switches in effect (KernelChoice)
  std::string skipped;  // not run: this build has no instance for the case (a lean build's sweep)
};

const char* vname(VFormat f) {
  const char* n[] = {"f16", "bf16", "q8_0", "q4_0", "q8_0_planar"};
  return n[static_cast<int>(f)];
}

// --uniform: every sequence of a batch has kv keys (the peer bench's batches)
bool g_uniform = false;
// --host-lens: pass the lengths on the host too (AttnParams::kv_len_host: the planner's
// one-round rule for batches)
bool g_host_lens = false;
// --capacity N: the cache holds N keys a sequence and max_kv_len = N, the lengths stay --kv (an
// engine that captures one CUDA graph for every length passes its capacity)
int g_capacity = 0;

// Lengths of a batch: batch 1 (or --uniform) = kv; batch > 1: varied, evenly from kv/4 to kv.
std::vector<int> lengths(const Case& c) {
  std::vector<int> L(c.batch);
  for (int b = 0; b < c.batch; ++b)
    L[b] = c.batch == 1 || g_uniform ? c.kv : c.kv / 4 + static_cast<int>((static_cast<int64_t>(c.kv) * 3 / 4) * b / (c.batch - 1));
  return L;
}

// One more call with the per-block timeline on (device/trace.hpp): for each point, when the
// blocks passed it (global timer, µs from the first block's entry: min / median / max) and
// the median SM-clock cycles from the block's own entry.
void trace_call(AttnParams& p, Timer& t) {
#if defined(PACKFA_TRACE)
  using namespace packfa::device;
  const size_t n = static_cast<size_t>(kTraceKernels) * kTraceBlocks * kTracePoints * 2;
  unsigned long long* buf;
  CK(cudaMalloc(&buf, n * 8));
  CK(cudaMemset(buf, 0, n * 8));
  packfa::detail::g_trace = buf;
  unsigned long long* spin_end;
  CK(cudaMalloc(&spin_end, 8));
  // PACKFA_TRACE_SPIN_SMEM=1: the spin kernel runs with the largest shared-memory carve-out
  // (as a GEMM before the attention would), to tell launch latency from carve-out switching;
  // PACKFA_TRACE_NO_EVENT=1: no event between the spin kernel and the call.
  const bool spin_smem = std::getenv("PACKFA_TRACE_SPIN_SMEM") != nullptr;
  const bool no_event = std::getenv("PACKFA_TRACE_NO_EVENT") != nullptr;
  if (spin_smem) {
    CK(cudaFuncSetAttribute(spin_stamp_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    CK(cudaFuncSetAttribute(spin_stamp_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
  }
  // PACKFA_TRACE_WARM=1: the same call once more right before (code and data hot in L2)
  if (std::getenv("PACKFA_TRACE_WARM")) PK(fa_packed16_forward(p, nullptr));
  spin_stamp_kernel<<<1, 1, spin_smem ? 100 * 1024 : 0>>>(40000, spin_end);
  if (!no_event) CK(cudaEventRecord(t.a));
  PK(fa_packed16_forward(p, nullptr));
  CK(cudaEventRecord(t.b));
  CK(cudaEventSynchronize(t.b));
  packfa::detail::g_trace = nullptr;
  float ms;
  CK(cudaEventElapsedTime(&ms, t.a, t.b));
  std::vector<unsigned long long> h(n);
  CK(cudaMemcpy(h.data(), buf, n * 8, cudaMemcpyDeviceToHost));
  cudaFree(buf);
  unsigned long long spin_t = 0;
  CK(cudaMemcpy(&spin_t, spin_end, 8, cudaMemcpyDeviceToHost));
  cudaFree(spin_end);
  auto at = [&](int k, int blk, int pt, int w) { return h[((static_cast<size_t>(k) * kTraceBlocks + blk) * kTracePoints + pt) * 2 + w]; };
  unsigned long long t0 = ~0ull;
  for (int blk = 0; blk < kTraceBlocks; ++blk)
    if (at(0, blk, 0, 1)) t0 = std::min(t0, at(0, blk, 0, 1));
  char ev[32] = "n/a";  // PACKFA_TRACE_NO_EVENT: no start event for this call
  if (!no_event) std::snprintf(ev, sizeof ev, "%.1f us", ms * 1e3);
  std::printf("  trace (events: %s; global timer from the first split block's entry, us; cycles from the block's entry)\n", ev);
  std::printf("    spin kernel end -> first split block entry: %.2f us\n", (static_cast<double>(t0) - static_cast<double>(spin_t)) * 1e-3);
  const char* names[2][kTracePoints] = {
      {"entry", "pdl wait", "key range", "1st stage", "q set-up", "1st copy", "1st chunk", "loop end", "merged", "end"},
      {"entry", "pdl wait", "end"}};
  for (int k = 0; k < kTraceKernels; ++k)
    for (int pt = 0; pt < kTracePoints && names[k][pt]; ++pt) {
      std::vector<double> g, c;
      for (int blk = 0; blk < kTraceBlocks; ++blk) {
        if (!at(k, blk, pt, 1)) continue;
        g.push_back((static_cast<double>(at(k, blk, pt, 1)) - static_cast<double>(t0)) * 1e-3);
        c.push_back(static_cast<double>(at(k, blk, pt, 0) - at(k, blk, 0, 0)));
      }
      if (g.empty()) continue;
      std::sort(g.begin(), g.end());
      std::printf("    %-8s %-10s blocks %4zu  t %7.2f %7.2f %7.2f us   %8.0f cycles\n", k ? "combine" : "split",
                  names[k][pt], g.size(), g.front(), g[g.size() / 2], g.back(), median(c));
    }
  // Block end times per multiprocessor: is the tail one block of a pair, or whole SMs?
  {
    std::vector<std::vector<double>> per_sm(1024);
    for (int blk = 0; blk < kTraceBlocks; ++blk) {
      if (!at(0, blk, 9, 1)) continue;
      const size_t sm = static_cast<size_t>(at(0, blk, kTracePoints - 1, 0));
      if (sm < per_sm.size()) per_sm[sm].push_back((static_cast<double>(at(0, blk, 9, 1)) - static_cast<double>(t0)) * 1e-3);
    }
    std::vector<double> first, last, gap;
    for (auto& v : per_sm) {
      if (v.size() < 2) continue;
      std::sort(v.begin(), v.end());
      first.push_back(v.front());
      last.push_back(v.back());
      gap.push_back(v.back() - v.front());
    }
    if (!first.empty()) {
      std::sort(first.begin(), first.end());
      std::sort(last.begin(), last.end());
      std::sort(gap.begin(), gap.end());
      std::printf("    per SM (%zu SMs with >= 2 blocks): earlier block ends %.1f / %.1f / %.1f us, later %.1f / %.1f / %.1f, "
                  "gap %.1f / %.1f / %.1f (min / median / max)\n",
                  first.size(), first.front(), first[first.size() / 2], first.back(), last.front(), last[last.size() / 2],
                  last.back(), gap.front(), gap[gap.size() / 2], gap.back());
    }
  }
#else
  (void)p, (void)t;
#endif
}

Measured run(const Case& c, int reps, size_t l2_bytes) {
  const int D = c.D, G = c.G;
  const std::vector<int> L = lengths(c);
  const bool packed = c.kf == KFormat::packed16;
  const int64_t krow = packed ? D : 2 * D, srow = packed ? 2 * D / 32 : 0, vrow = v_row_bytes(c.vf, D);
  const int64_t vsrow = v_scale_row_bytes(c.vf, D);  // q8_0_planar's scale plane
  const int64_t cap = std::max<int64_t>(c.kv, g_capacity);
  const int64_t kslot = G * krow, sslot = G * srow, vslot = G * vrow, vsslot = G * vsrow;
  const size_t set_bytes = static_cast<size_t>(c.batch) * c.kv * (kslot + sslot + vslot + vsslot);  // bytes a call reads
  // enough copies that consecutive calls do not hit in L2
  const int nsets = static_cast<int>(std::max<size_t>(1, std::min<size_t>(16, (4 * l2_bytes) / set_bytes + 1)));
  struct Set {
    void *k, *s, *v, *vs;
  };
  std::vector<Set> sets(nsets);
  for (int i = 0; i < nsets; ++i) {
    CK(cudaMalloc(&sets[i].k, c.batch * cap * kslot));
    fill(sets[i].k, c.batch * cap * kslot, packed ? 0 : 2, 11 + i);
    sets[i].s = nullptr;
    if (packed) {
      CK(cudaMalloc(&sets[i].s, c.batch * cap * sslot));
      fill(sets[i].s, c.batch * cap * sslot, 1, 21 + i);
    }
    CK(cudaMalloc(&sets[i].v, c.batch * cap * vslot));
    const int vkind = c.vf == VFormat::q8_0 ? 3 : c.vf == VFormat::q4_0 ? 4 : c.vf == VFormat::q8_0_planar ? 0 : 2;
    fill(sets[i].v, c.batch * cap * vslot, vkind, 31 + i);
    sets[i].vs = nullptr;
    if (vsrow) {
      CK(cudaMalloc(&sets[i].vs, c.batch * cap * vsslot));
      fill(sets[i].vs, c.batch * cap * vsslot, 1, 41 + i);
    }
  }
  void *q, *o;
  int32_t* kvlen;
  const size_t qn = static_cast<size_t>(c.batch) * c.nq * c.H * D;
  CK(cudaMalloc(&q, qn * 2));
  CK(cudaMalloc(&o, qn * 2));
  fill(q, qn * 2, 2, 5);
  CK(cudaMalloc(&kvlen, c.batch * 4));
  CK(cudaMemcpy(kvlen, L.data(), c.batch * 4, cudaMemcpyHostToDevice));

  AttnParams p;
  p.num_splits = g_splits;
  p.batch = c.batch;
  p.nq = c.nq;
  p.n_q_heads = c.H;
  p.n_kv_heads = G;
  p.head_dim = D;
  p.max_kv_len = static_cast<int>(cap);
  if (g_host_lens) p.kv_len_host = L.data();
  p.q = {DType::f16, q, static_cast<int64_t>(c.nq) * c.H * D, static_cast<int64_t>(c.H) * D, D};
  p.o = {DType::f16, o, static_cast<int64_t>(c.nq) * c.H * D, static_cast<int64_t>(c.H) * D, D};
  p.k.format = c.kf;
  // {seq, slot, head} byte strides of a plane whose (slot, head) row has `row` bytes
  auto strides = [&](int64_t row) {
    return g_head_major ? Strides{G * cap * row, row, cap * row} : Strides{cap * G * row, G * row, row};
  };
  p.k.data_strides = strides(krow);
  p.k.scale_strides = strides(srow);
  p.k.block = 32;
  p.v.format = c.vf;
  p.v.strides = strides(vrow);
  p.v.scale_strides = strides(vsrow);
  p.kv_len = kvlen;
  p.dot = c.dot;
  p.causal = c.causal;
  int32_t* table = nullptr;
  if (g_paged > 0) {
    const int64_t per_seq = (cap + g_paged - 1) / g_paged;
    std::vector<int32_t> ids(static_cast<size_t>(c.batch) * per_seq);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    uint64_t x = 88172645463325252ull;  // xorshift: a fixed scramble
    for (size_t i = ids.size(); i > 1; --i) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      std::swap(ids[i - 1], ids[x % i]);
    }
    CK(cudaMalloc(&table, ids.size() * 4));
    CK(cudaMemcpy(table, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    p.paged.block_table = table;
    p.paged.table_stride = per_seq;
    p.paged.page_size = g_paged;
    p.paged.num_pages = static_cast<int>(ids.size());
    for (Strides* st : {&p.k.data_strides, &p.k.scale_strides, &p.v.strides, &p.v.scale_strides})
      st->seq = g_paged * st->slot;  // token-major: a page is g_paged consecutive slots
  }
  KernelChoice ch;
  p.k.data = sets[0].k;
  p.k.scales = packed ? sets[0].s : nullptr;
  p.v.data = sets[0].v;
  p.v.scales = sets[0].vs;
  auto release = [&] {
    for (auto& s : sets) {
      cudaFree(s.k);
      if (s.s) cudaFree(s.s);
      cudaFree(s.v);
      if (s.vs) cudaFree(s.vs);
    }
    cudaFree(q);
    cudaFree(o);
    cudaFree(kvlen);
    if (table) cudaFree(table);
  };
  const Status sel = select_kernel(p, 0, &ch);
  if (sel.code() == Code::not_compiled) {
    release();
    Measured m;
    m.skipped = sel.message();
    return m;
  }
  PK(sel);
  size_t ws = 0;
  PK(fa_workspace_bytes(p, 0, &ws));
  void* wsp = nullptr;
  if (ws) CK(cudaMalloc(&wsp, ws));
  p.workspace = wsp;
  p.workspace_bytes = ws;

  // Device time of one call, two ways, each the median of `reps` after 10 warm-ups:
  //  - us: events before a 40 us spin kernel and after the call, minus the same for the spin
  //    kernel alone: the time the call adds behind a running kernel (its launch gap, both
  //    kernels and the gap between them), as in a stream or graph of back-to-back kernels;
  //  - us_event (sessions 1-3): spin kernel, event, call, event. The event between the spin
  //    kernel and the call delays the call's launch: about 3.3 us at kv = 4k on the H200
  //    (globaltimer trace: spin end -> first block 4.35 us with it, 1.0 us without).
  Timer t;
  std::vector<double> us_all, us_spin, us_event;
  auto elapsed_us = [&] {
    CK(cudaEventSynchronize(t.b));
    float ms;
    CK(cudaEventElapsedTime(&ms, t.a, t.b));
    return ms * 1e3;
  };
  for (int i = 0; i < reps + 10; ++i) {
    // two calls per iteration, each on its own set: no call reads what the one before read
    const Set& s = sets[(2 * i) % nsets];
    p.k.data = s.k;
    p.k.scales = packed ? s.s : nullptr;
    p.v.data = s.v;
    p.v.scales = s.vs;
    CK(cudaEventRecord(t.a));
    spin_kernel<<<1, 1>>>(40000);
    PK(fa_packed16_forward(p, nullptr));
    CK(cudaEventRecord(t.b));
    const double all = elapsed_us();
    CK(cudaEventRecord(t.a));
    spin_kernel<<<1, 1>>>(40000);
    CK(cudaEventRecord(t.b));
    const double spin = elapsed_us();
    const Set& s2 = sets[(2 * i + 1) % nsets];
    p.k.data = s2.k;
    p.k.scales = packed ? s2.s : nullptr;
    p.v.data = s2.v;
    p.v.scales = s2.vs;
    spin_kernel<<<1, 1>>>(40000);
    CK(cudaEventRecord(t.a));
    PK(fa_packed16_forward(p, nullptr));
    CK(cudaEventRecord(t.b));
    const double ev = elapsed_us();
    if (i >= 10) {
      us_all.push_back(all);
      us_spin.push_back(spin);
      us_event.push_back(ev);
    }
  }
  if (g_trace) trace_call(p, t);
  Measured m;
  m.us = median(us_all) - median(us_spin);
  m.us_event = median(us_event);
  double keys = 0;
  for (int l : L) keys += l;
  m.bytes = keys * (kslot + sslot + vslot + vsslot) + 2.0 * qn * 2;
  m.gbs = m.bytes / (m.us * 1e-6) / 1e9;
  // visible (row, key) pairs: row i of a sequence of length l sits at l - nq + i and sees keys
  // 0..pos when causal, all l keys otherwise
  double pairs = 0;
  for (int l : L)
    for (int i = 0; i < c.nq; ++i) {
      const int64_t pos = static_cast<int64_t>(l) - c.nq + i;
      pairs += c.causal ? static_cast<double>(std::max<int64_t>(0, std::min<int64_t>(l, pos + 1))) : l;
    }
  m.flops = 4.0 * D * c.H * pairs;
  m.tflops = m.flops / (m.us * 1e-6) / 1e12;
  m.splits = ch.num_splits;
  m.kernel = ch.name;
  m.plan = " rg=" + std::to_string(ch.row_groups) + " comb=" + ch.combine + (ch.claims ? " claims" : "") +
           (ch.split_rounds ? " rounds" : "") + (ch.one_round ? " one_round" : "");
  release();
  if (wsp) cudaFree(wsp);
  return m;
}

// ---- 8c: pack -> attention (split + combine) at kv = 4k, PDL on/off, stream/graph ----------
struct ChainResult {
  double stream_off, stream_on, graph_off, graph_on;
};

ChainResult chain_bench(int reps) {
  const int D = 128, H = 32, G = 8, kv = 4096;
  const int64_t kslot = G * D, sslot = G * 8, vslot = G * 136;
  void *pay, *sc, *v, *q, *o, *knew, *vnew, *ws;
  int32_t* kvlen;
  CK(cudaMalloc(&pay, kv * kslot));
  CK(cudaMalloc(&sc, kv * sslot));
  CK(cudaMalloc(&v, kv * vslot));
  fill(pay, kv * kslot, 0, 1);
  fill(sc, kv * sslot, 1, 2);
  fill(v, kv * vslot, 3, 3);
  CK(cudaMalloc(&q, H * D * 2));
  CK(cudaMalloc(&o, H * D * 2));
  CK(cudaMalloc(&knew, G * D * 2));
  CK(cudaMalloc(&vnew, G * D * 2));
  fill(q, H * D * 2, 2, 4);
  fill(knew, G * D * 2, 2, 5);
  fill(vnew, G * D * 2, 2, 6);
  CK(cudaMalloc(&kvlen, 4));
  CK(cudaMemcpy(kvlen, &kv, 4, cudaMemcpyHostToDevice));

  PackKParams pk;
  pk.n_tokens = 1;
  pk.n_kv_heads = G;
  pk.head_dim = D;
  pk.src_type = DType::f16;
  pk.src = knew;
  pk.src_token_stride = G * D;
  pk.src_head_stride = D;
  pk.dst.format = KFormat::packed16;
  pk.dst.data = pay;
  pk.dst.data_strides = {0, kslot, D};
  pk.dst.scales = sc;
  pk.dst.scale_strides = {0, sslot, 8};
  pk.base_slot = kv - 1;
  QuantVParams qv;
  qv.n_tokens = 1;
  qv.n_kv_heads = G;
  qv.head_dim = D;
  qv.src_type = DType::f16;
  qv.src = vnew;
  qv.src_token_stride = G * D;
  qv.src_head_stride = D;
  qv.dst.format = VFormat::q8_0;
  qv.dst.data = v;
  qv.dst.strides = {0, vslot, 136};
  qv.base_slot = kv - 1;
  AttnParams p;
  p.n_q_heads = H;
  p.n_kv_heads = G;
  p.head_dim = D;
  p.max_kv_len = kv;
  p.q = {DType::f16, q, H * D, H * D, D};
  p.o = {DType::f16, o, H * D, H * D, D};
  p.k.data = pay;
  p.k.data_strides = {kv * kslot, kslot, D};
  p.k.scales = sc;
  p.k.scale_strides = {kv * sslot, sslot, 8};
  p.v.format = VFormat::q8_0;
  p.v.data = v;
  p.v.strides = {kv * vslot, vslot, 136};
  p.kv_len = kvlen;
  size_t wsb = 0;
  PK(fa_workspace_bytes(p, 0, &wsb));
  CK(cudaMalloc(&ws, wsb + 16));
  p.workspace = ws;
  p.workspace_bytes = wsb + 16;

  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto step = [&](int pdl) {
    pk.pdl = qv.pdl = p.pdl = pdl;
    PK(pack_k_packed16(pk, st));
    PK(quantize_v(qv, st));
    PK(fa_packed16_forward(p, st));
  };
  const int per = 20;  // steps per timed sample (one layer's attention per step)
  auto time_stream = [&](int pdl) {
    Timer t;
    std::vector<double> us;
    for (int i = 0; i < reps + 5; ++i) {
      CK(cudaEventRecord(t.a, st));
      for (int j = 0; j < per; ++j) step(pdl);
      CK(cudaEventRecord(t.b, st));
      CK(cudaEventSynchronize(t.b));
      float ms;
      CK(cudaEventElapsedTime(&ms, t.a, t.b));
      if (i >= 5) us.push_back(ms * 1e3 / per);
    }
    return median(us);
  };
  auto time_graph = [&](int pdl) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int j = 0; j < per; ++j) step(pdl);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    Timer t;
    std::vector<double> us;
    for (int i = 0; i < reps + 5; ++i) {
      CK(cudaEventRecord(t.a, st));
      CK(cudaGraphLaunch(ge, st));
      CK(cudaEventRecord(t.b, st));
      CK(cudaEventSynchronize(t.b));
      float ms;
      CK(cudaEventElapsedTime(&ms, t.a, t.b));
      if (i >= 5) us.push_back(ms * 1e3 / per);
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return median(us);
  };
  ChainResult r;
  r.stream_off = time_stream(0);
  r.stream_on = time_stream(1);
  r.graph_off = time_graph(0);
  r.graph_on = time_graph(1);
  for (void* x : {pay, sc, v, q, o, knew, vnew, ws}) cudaFree(x);
  cudaFree(kvlen);
  cudaStreamDestroy(st);
  return r;
}

}  // namespace

// Host cost of one call (CPU µs, the GPU kept busy elsewhere): validate() alone, and
// fa_packed16_forward's whole enqueue (validation, planning, the pointer check of
// PACKFA_CHECK_POINTERS, the launch). A decode step calls attention once per layer.
void host_overhead() {
  const int D = 128, G = 8, H = 32, kv = 256;
  void *q, *o, *k, *s, *v;
  int32_t* len;
  CK(cudaMalloc(&q, H * D * 2));
  CK(cudaMalloc(&o, H * D * 2));
  CK(cudaMalloc(&k, kv * G * D));
  CK(cudaMalloc(&s, kv * G * 8));
  CK(cudaMalloc(&v, kv * G * 136));
  CK(cudaMalloc(&len, 4));
  CK(cudaMemcpy(len, &kv, 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(k, 0, kv * G * D));
  CK(cudaMemset(s, 0, kv * G * 8));
  CK(cudaMemset(v, 0, kv * G * 136));
  AttnParams p;
  p.n_q_heads = H; p.n_kv_heads = G; p.head_dim = D; p.max_kv_len = kv;
  p.q = {DType::f16, q, H * D, H * D, D};
  p.o = {DType::f16, o, H * D, H * D, D};
  p.k.data = k; p.k.data_strides = {0, G * D, D};
  p.k.scales = s; p.k.scale_strides = {0, G * 8, 8};
  p.v = {VFormat::q8_0, v, {0, G * 136, 136}};
  p.kv_len = len;
  p.num_splits = 1;
  const int n = 4000;
  auto per_call = [&](auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) f();
    CK(cudaDeviceSynchronize());
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
  };
  for (int i = 0; i < 100; ++i) PK(fa_packed16_forward(p, nullptr));
  CK(cudaDeviceSynchronize());
  const double v_us = per_call([&] { PK(validate(p)); });
  const double f_us = per_call([&] { PK(fa_packed16_forward(p, nullptr)); });
  const char* env = std::getenv("PACKFA_CHECK_POINTERS");
  std::printf("host: validate %.3f us per call; fa_packed16_forward %.3f us per call (enqueue + GPU, kv 256; "
              "PACKFA_CHECK_POINTERS=%s)\n", v_us, f_us, env ? env : "1 (default)");
  for (void* x : {q, o, k, s, v}) cudaFree(x);
  cudaFree(len);
}

int main(int argc, char** argv) {
  std::string json;
  bool quick = false, chain_only = false, host_only = false;
  int reps = 60, only_kv = 0, only_nq = 0, only_d = 0;
  int one_h = 0, one_g = 0, one_batch = 0;  // --heads / --kv-heads / --batch: one case of that shape
  std::string only_v, one_dot;
  bool no_base = false, prefill = false;
  std::string only_causal;
  packfa::args::Parser ap("packfa-bench",
                          "usage: packfa-bench [--json PATH] [--quick] [--reps N] [--chain-only]\n"
                          "                    [--kv N] [--nq N] [--d N] [--v f16|q8_0|q4_0|q8_0_planar] [--no-baseline]\n"
                          "                    [--splits N] [--trace] [--head-major] [--prefill [--causal on|off]]\n"
                          "                    [--heads H --kv-heads G --batch B --dot int8|f16 --uniform]\n"
                          "Decode / MTP sweep of fa_packed16_forward on the GPU (exits 1 without one).\n"
                          "  --reps N      timed calls per case (50..100000, default 60)\n"
                          "  --kv/--nq/--d/--v   run only the sweep's cases with that value\n"
                          "                (kv 4096, 32768, 131072; nq 1, 4; d 128, 256)\n"
                          "  --heads/--kv-heads/--batch/--dot/--uniform   one case of any shape instead of the sweep:\n"
                          "                D --d (128), kv --kv (32768), nq --nq (1), V --v (q8_0), H --heads (32),\n"
                          "                G --kv-heads (8), --batch (1), --dot (int8); --uniform: all sequences kv long\n"
                          "  --host-lens   also pass the lengths on the host (kv_len_host: the planner's one-round rule)\n"
                          "  --capacity N  the cache holds N keys a sequence and max_kv_len = N; the lengths stay --kv\n"
                          "  --splits N    force the split-KV count (0 = the dispatcher's choice, up to 1024)\n"
                          "  --quick       fewer cases; --chain-only: only the pack -> attention -> combine chain\n"
                          "  --no-baseline skip the f16-K comparison; --head-major: [seq][head][slot] cache order\n"
                          "  --trace       per-block timeline of one more call (PACKFA_TRACE builds)\n"
                          "  --paged N     read the cache as scrambled pages of N slots (16, 32, 64, 128, 256)\n"
                          "  --host-overhead  only the host cost of one call (validate, forward enqueue)\n"
                          "  --prefill     prefill chunks instead of the decode sweep: nq 512, 2048 x kv 4096, 32768,\n"
                          "                131072 x causal on/off x D 64, 128, 256 (q8_0 V; D 128 also f16 V), 32/8\n"
                          "                heads, packed16 K; TFLOP/s over the visible pairs; no f16-K baseline,\n"
                          "                no chain; --causal on|off keeps one of the two; --dot f16 runs\n"
                          "                them in the fp16-Q dot mode (default int8)\n");
  ap.text("--json", &json)
      .flag("--quick", &quick)
      .integer("--reps", &reps, 50, 100000)
      .flag("--chain-only", &chain_only)
      .flag("--host-overhead", &host_only)
      .integer("--kv", &only_kv, 1, INT32_MAX)
      .integer("--nq", &only_nq, 1, 65536)
      .integer("--d", &only_d, 1, 1024)
      .choice("--v", &only_v, {"f16", "q8_0", "q4_0", "q8_0_planar"})
      .flag("--no-baseline", &no_base)
      .integer("--splits", &g_splits, 0, 1024)
      .flag("--trace", &g_trace)
      .flag("--head-major", &g_head_major)
      .integer("--paged", &g_paged, 16, 256)
      .flag("--prefill", &prefill)
      .choice("--causal", &only_causal, {"on", "off"})
      .integer("--heads", &one_h, 1, 1024)
      .integer("--kv-heads", &one_g, 1, 1024)
      .integer("--batch", &one_batch, 1, 4096)
      .choice("--dot", &one_dot, {"int8", "f16"})
      .flag("--uniform", &g_uniform)
      .flag("--host-lens", &g_host_lens)
      .integer("--capacity", &g_capacity, 1, INT32_MAX);
  int arg_rc = 0;
  if (!ap.parse(argc, argv, 1, &arg_rc)) return arg_rc;
  const bool filtered = only_kv || only_nq || only_d || !only_v.empty() || !only_causal.empty();
  if (chain_only && filtered) return ap.fail("--kv/--nq/--d/--v select sweep cases; --chain-only runs no sweep");
  if (chain_only && prefill) return ap.fail("--prefill runs the prefill cases; --chain-only runs none");
  if (!only_causal.empty() && !prefill) return ap.fail("--causal selects prefill cases; add --prefill");
  if (g_paged && ((g_paged & (g_paged - 1)) != 0)) return ap.fail("--paged: a power of two, 16..256");
  if (g_paged && g_head_major) return ap.fail("--paged reads the token-major cache; drop --head-major");

  std::vector<Case> cases;
  // --dot with --prefill picks the prefill cases' dot mode (default int8); alone it makes one decode case
  const bool one_case = one_h || one_g || one_batch || (!one_dot.empty() && !prefill) || g_uniform;
  if (one_case && (prefill || chain_only)) return ap.fail("--heads/--kv-heads/--batch/--uniform: decode cases only");
  if (!one_dot.empty() && chain_only) return ap.fail("--dot: a decode case or the prefill cases; --chain-only runs none");
  if (one_case) {
    Case c{only_d ? only_d : 128, one_h ? one_h : 32, one_g ? one_g : 8, only_nq ? only_nq : 1, one_batch ? one_batch : 1,
           only_kv ? only_kv : 32768, VFormat::q8_0, KFormat::packed16};
    if (!only_v.empty())
      for (VFormat f : {VFormat::f16, VFormat::q8_0, VFormat::q4_0, VFormat::q8_0_planar})
        if (only_v == vname(f)) c.vf = f;
    if (one_dot == "f16") c.dot = DotMode::f16;
    if (c.H % c.G != 0) return ap.fail("--heads must be a multiple of --kv-heads");
    cases.push_back(c);
  } else if (prefill) {  // issue 17: the default list below stays as it is (decode A/B compares it)
    struct DV {
      int D;
      VFormat vf;
    };
    for (int nq : {512, 2048})
      for (int kv : {4096, 32768, 131072})
        for (bool causal : {false, true})
          for (DV dv : {DV{64, VFormat::q8_0}, DV{128, VFormat::q8_0}, DV{128, VFormat::f16}, DV{256, VFormat::q8_0}}) {
            if (quick && (kv == 131072 || dv.D != 128)) continue;
            Case c{dv.D, 32, 8, nq, 1, kv, dv.vf, KFormat::packed16};
            c.causal = causal;
            if (one_dot == "f16") c.dot = DotMode::f16;
            cases.push_back(c);
          }
  } else if (!chain_only) {
    for (int kv : {4096, 32768, 131072})
      for (int nq : {1, 4})
        for (int batch : {1, 16})
          for (VFormat vf : {VFormat::f16, VFormat::q8_0, VFormat::q4_0, VFormat::q8_0_planar}) {
            if (quick && (batch == 16 || kv == 32768)) continue;
            cases.push_back({128, 32, 8, nq, batch, kv, vf, KFormat::packed16});
          }
    for (VFormat vf : {VFormat::f16, VFormat::q8_0, VFormat::q4_0, VFormat::q8_0_planar})
      cases.push_back({256, 24, 4, 1, 1, 131072, vf, KFormat::packed16});
  }
  auto selected = [&](const Case& c) {
    return one_case || !((only_kv && c.kv != only_kv) || (only_nq && c.nq != only_nq) || (only_d && c.D != only_d) ||
             (!only_v.empty() && only_v != vname(c.vf)) || (!only_causal.empty() && (only_causal == "on") != c.causal));
  };
  if (prefill && filtered && std::none_of(cases.begin(), cases.end(), selected))
    return ap.fail("no prefill case matches --kv/--nq/--d/--v/--causal as given: nq 512 and 2048, kv 4096, 32768, "
                   "131072 (not with --quick), d 64, 128, 256 (--quick: 128), V q8_0 (and f16 at d 128), causal on and off");
  if (filtered && !one_case && std::none_of(cases.begin(), cases.end(), selected))  // explain an empty run
    return ap.fail("no case of the sweep matches --kv/--nq/--d/--v as given: the sweep has kv 4096, 32768, 131072 "
                   "(32768 not with --quick), nq 1 and 4, d 128 (all of them) and d 256 (kv 131072, nq 1)");

  const packfa::DeviceInfo dev = packfa::device_info(0);
  if (!dev.present) {  // asked to measure, nothing to measure on: a failure, not a pass
    std::fprintf(stderr, "packfa-bench: no GPU to measure on: %s\n", dev.why_absent.c_str());
    return 1;
  }
  if (host_only) {
    host_overhead();
    return 0;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const char* commit = std::getenv("PACKFA_COMMIT") ? std::getenv("PACKFA_COMMIT") : PACKFA_COMMIT;
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const double copy = copy_bandwidth();
  std::printf("GPU %s (%d SMs), device copy %.0f GB/s, commit %s%s\n", prop.name, prop.multiProcessorCount, copy, commit,
              g_head_major ? ", head-major cache" : "");

  std::string rows;
  if (prefill) {
    std::printf("%-4s %-5s %-5s %-7s %-6s %-5s %-6s %10s %8s %10s  %s\n", "D", "H/G", "nq", "kv", "causal", "V", "dot",
                "us", "TFLOP/s", "event us", "kernel");
  } else {
    std::printf("%-4s %-4s %-3s %-5s %-7s %-5s %-6s %9s %9s %8s %6s %9s %7s %8s  %s\n", "D", "H/G", "nq", "batch", "kv",
                "V", "dot", "us", "MB", "GB/s", "%copy", "f16K us", "speedup", "event us", "kernel");
  }
  for (const Case& c : cases) {
    if (!selected(c)) continue;
    if (prefill) {  // no f16-K baseline: the prefill A/B is against SDPA (bench/peers/peer_bench.py --prefill)
      const Measured m = run(c, reps, prop.l2CacheSize);
      if (!m.skipped.empty()) {
        std::printf("%-4d %2d/%-2d %-5d %-7d skipped: %s\n", c.D, c.H, c.G, c.nq, c.kv, m.skipped.c_str());
        continue;
      }
      std::printf("%-4d %2d/%-2d %-5d %-7d %-6s %-5s %-6s %10.1f %8.1f %10.1f  %s s=%d\n", c.D, c.H, c.G, c.nq, c.kv,
                  c.causal ? "yes" : "no", vname(c.vf), c.dot == DotMode::f16 ? "f16" : "int8", m.us, m.tflops, m.us_event,
                  m.kernel.c_str(), m.splits);
      char buf[1024];
      std::snprintf(buf, sizeof buf,
                    "%s{\"head_dim\":%d,\"n_q_heads\":%d,\"n_kv_heads\":%d,\"nq\":%d,\"batch\":%d,\"max_kv\":%d,"
                    "\"causal\":%s,\"v_format\":\"%s\",\"k_format\":\"packed16\",\"dot\":\"%s\",\"median_us\":%.3f,"
                    "\"flops\":%.0f,\"tflop_per_s\":%.2f,\"bytes\":%.0f,\"gb_per_s\":%.1f,\"splits\":%d,\"kernel\":\"%s\","
                    "\"event_median_us\":%.3f}",
                    rows.empty() ? "" : ",\n    ", c.D, c.H, c.G, c.nq, c.batch, c.kv, c.causal ? "true" : "false",
                    vname(c.vf), c.dot == DotMode::f16 ? "f16" : "int8", m.us, m.flops, m.tflops, m.bytes, m.gbs, m.splits,
                    m.kernel.c_str(), m.us_event);
      rows += buf;
      continue;
    }
    const Measured m = run(c, reps, prop.l2CacheSize);
    if (!m.skipped.empty()) {  // a lean build's sweep goes on; a JSON row only for what ran
      std::printf("%-4d %2d/%-2d %-3d %-5d %-7d %-5s skipped: %s\n", c.D, c.H, c.G, c.nq, c.batch, c.kv, vname(c.vf),
                  m.skipped.c_str());
      if (one_case) return 1;  // the one case asked for did not run
      continue;
    }
    Case base = c;
    base.kf = KFormat::f16;
    const Measured mb = no_base ? m : run(base, reps, prop.l2CacheSize);
    if (!mb.skipped.empty()) {  // no baseline to compare with: say so rather than print a ratio
      std::fprintf(stderr, "the f16-K baseline is not in this build (%s): add --no-baseline\n", mb.skipped.c_str());
      return 1;
    }
    const double pct = 100.0 * m.gbs / copy;
    std::printf("%-4d %2d/%-2d %-3d %-5d %-7d %-5s %-6s %9.1f %9.1f %8.0f %5.1f%% %9.1f %6.2fx %8.1f  %s s=%d%s\n", c.D, c.H, c.G,
                c.nq, c.batch, c.kv, vname(c.vf), c.dot == DotMode::f16 ? "f16" : "int8", m.us, m.bytes / 1e6, m.gbs, pct, mb.us, mb.us / m.us, m.us_event,
                m.kernel.c_str(), m.splits, m.plan.c_str());
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "%s{\"head_dim\":%d,\"n_q_heads\":%d,\"n_kv_heads\":%d,\"nq\":%d,\"batch\":%d,\"max_kv\":%d,"
                  "\"v_format\":\"%s\",\"k_format\":\"packed16\",\"dot\":\"%s\",\"median_us\":%.3f,\"bytes\":%.0f,"
                  "\"gb_per_s\":%.1f,\"pct_of_copy\":%.2f,\"splits\":%d,\"kernel\":\"%s\","
                  "\"f16k_median_us\":%.3f,\"f16k_gb_per_s\":%.1f,\"f16k_pct_of_copy\":%.2f,\"speedup_vs_f16k\":%.3f,"
                  "\"event_median_us\":%.3f,\"f16k_event_median_us\":%.3f}",
                  rows.empty() ? "" : ",\n    ", c.D, c.H, c.G, c.nq, c.batch, c.kv, vname(c.vf), c.dot == DotMode::f16 ? "f16" : "int8", m.us, m.bytes, m.gbs,
                  pct, m.splits, m.kernel.c_str(), mb.us, mb.gbs, 100.0 * mb.gbs / copy, mb.us / m.us, m.us_event,
                  mb.us_event);
    rows += buf;
  }
  const ChainResult ch = filtered || prefill || one_case ? ChainResult{} : chain_bench(reps);
  if (!prefill)
    std::printf("\nchain pack->attention->combine, kv=4096 D=128 32/8 q8_0 (us per step):\n"
                "  stream PDL off %.2f | stream PDL on %.2f | graph PDL off %.2f | graph PDL on %.2f\n",
                ch.stream_off, ch.stream_on, ch.graph_off, ch.graph_on);
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json.c_str());
      return 1;
    }
    std::fprintf(f,
                 "{\n  \"gpu\": \"%s\",\n  \"sms\": %d,\n  \"date\": \"%s\",\n  \"commit\": \"%s\",\n"
                 "  \"mode\": \"%s\",\n  \"cache_layout\": \"%s\",\n"
                 "  \"copy_gb_per_s\": %.1f,\n  \"method\": \"median_us: median of %d event-timed (40 us spin kernel + call) minus median of the spin kernel alone "
                 "(the device time the call adds behind a running kernel); event_median_us: spin kernel, event, call, event (the event delays the launch); "
                 "10 warm-ups, inputs rotated past L2; copy = 1 GiB D2D memcpy, bytes read+written\",\n"
                 "  \"cases\": [\n    %s\n  ],\n"
                 "  \"chain_kv4096\": {\"stream_pdl_off_us\": %.3f, \"stream_pdl_on_us\": %.3f, "
                 "\"graph_pdl_off_us\": %.3f, \"graph_pdl_on_us\": %.3f}\n}\n",
                 prop.name, prop.multiProcessorCount, date, commit, prefill ? "prefill" : "decode",
                 g_paged ? (g_paged == 16 ? "paged16 (token-major pages, scrambled)" : g_paged == 32 ? "paged32" : g_paged == 64 ? "paged64" : g_paged == 128 ? "paged128" : "paged256")
                         : g_head_major ? "head-major [seq][head][slot]" : "token-major [seq][slot][head]", copy, reps,
                 rows.c_str(), ch.stream_off,
                 ch.stream_on, ch.graph_off, ch.graph_on);
    std::fclose(f);
    std::printf("wrote %s\n", json.c_str());
  }
  return 0;
}
