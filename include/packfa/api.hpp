// packfa/api.hpp — the public C++ API over device pointers.
//
// All tensors are described by a pointer plus byte strides, so packfa reads an engine's
// existing cache in place (contiguous, strided views). Layout conventions:
//   Q, O : [batch][nq][n_q_heads][head_dim]            (element strides given per axis)
//   K, V : [seq][slot][kv_head] rows of head_dim values (byte strides per axis)
// Query row i of sequence b sits at position pos[b][i] (default kv_len[b] - nq + i) and
// sees keys j with j <= pos (causal), j > pos - window (if window > 0), j < kv_len[b].
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "packfa/format.hpp"
#include "packfa/status.hpp"

namespace packfa {

struct Strides {  // bytes
  int64_t seq = 0, slot = 0, head = 0;
};

struct KCache {
  KFormat format = KFormat::packed16;
  const void* data = nullptr;    // packed16: int8 payload plane; f16: fp16 rows
  Strides data_strides;
  const void* scales = nullptr;  // packed16: fp16 scale plane (head_dim / block per row)
  Strides scale_strides;
  int block = 32;                // packed16 scale block: 32 (default) or 16
  // Optional K smoothing (docs/format.md): channel scale s[n_kv_heads][head_dim], f32.
  // The kernel multiplies q by s before quantizing Q. The shift m needs no kernel input.
  const float* smooth_scale = nullptr;
};

struct VCache {
  VFormat format = VFormat::f16;
  const void* data = nullptr;    // rows of v_row_bytes(format, head_dim)
  Strides strides;
  const void* scales = nullptr;  // q8_0_planar: fp16 scale plane (head_dim / 32 per row)
  Strides scale_strides;
};

// Paged KV cache (vLLM / SGLang block tables), one view for every plane of K and V.
// page_size == 0: not paged; key j of sequence b is at base + seq·b + slot·j + head·h.
// Paged: key j of sequence b is slot j % page_size of physical page
// pg = block_table[b · table_stride + j / page_size], at base + seq·pg + slot·(j % page_size)
// + head·h — each plane's Strides.seq is then the byte stride between pages. vLLM's NHD
// [pages][page_size][heads][dim] and HND [pages][heads][page_size][dim] layouts are both
// such strides. Pages may be shared between sequences and appear in any order.
struct PagedKV {
  const int32_t* block_table = nullptr;  // device int32 [batch][table_stride] of page ids
  int64_t table_stride = 0;              // elements between sequences' rows of the table
  int page_size = 0;                     // keys per page: 0 (off), 16, 32, 64, 128 or 256
  int num_pages = 0;                     // pages in the pool (ids >= it are out of contract)
};

// How ALiBi (alibi_max_bias > 0) meets the mask.
enum class AlibiMode : int {
  position = 0,  // s += mask + slope_h · (j - pos)   (the mask is a pure 0 / -inf visibility mask)
  ggml = 1,      // s += slope_h · mask                (ggml_soft_max_ext: the engine's mask, e.g.
                 //                                    llama.cpp's -|i - j| for ALiBi models)
};

// Optional device counters of out-of-contract device-side values (AttnParams::errors). The
// kernel never reads outside the cache it was described; what it did instead is documented
// in docs/format.md ("Device-side values").
enum ErrorCounter : int {
  kErrKvLen = 0,    // kv_len[b] < 0 or > max_kv_len: clamped into [0, max_kv_len]
  kErrQPos = 1,     // q_pos[b][i] < 0 or >= kv_len[b] (after clamping)
  kErrPageId = 2,   // a block_table entry < 0 or >= num_pages: the page reads as empty (keys hidden)
  kNumErrorCounters = 3,
};

struct QTensor {  // element strides
  DType type = DType::f16;
  const void* data = nullptr;
  int64_t seq_stride = 0, row_stride = 0, head_stride = 0;
};
struct OTensor {
  DType type = DType::f16;
  void* data = nullptr;
  int64_t seq_stride = 0, row_stride = 0, head_stride = 0;
};

// Upper bounds validate() enforces (Code::invalid_argument naming the field): batch, n_kv_heads
// and n_q_heads are launch grid dimensions; a KV head's query rows (nq x n_q_heads / n_kv_heads)
// and max_kv_len stay far from 32-bit overflow in the planner's and kernels' arithmetic.
constexpr int kMaxGridYZ = 65535;
constexpr int kMaxRows = 1 << 28;
constexpr int kMaxKeys = 1 << 30;
// pack_k_packed16 / quantize_v: n_tokens x n_kv_heads x head_dim / 16 (one launch's threads)
constexpr int64_t kMaxWriteItems = int64_t{1} << 37;

struct AttnParams {
  int batch = 1;
  int nq = 1;           // query rows per sequence (1 = decode; 2..16 = MTP / speculative)
  int n_q_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int max_kv_len = 0;   // host-side upper bound of kv_len[] (plans the split)

  QTensor q;
  KCache k;
  VCache v;
  OTensor o;

  const int32_t* kv_len = nullptr;  // device [batch]
  const int32_t* q_pos = nullptr;   // device [batch][nq] or null (kv_len - nq + i)

  float scale = 0.0f;   // softmax scale; 0 = 1/sqrt(head_dim)
  bool causal = true;
  int window = 0;       // sliding window (keys j > pos - window); 0 = off
  const uint16_t* mask = nullptr;   // additive fp16 mask, ggml layout [nq][kv] per sequence
  int64_t mask_seq_stride = 0, mask_row_stride = 0;  // elements
  float softcap = 0.0f;             // s = softcap * tanh(s / softcap); 0 = off
  const float* sinks = nullptr;     // device [n_q_heads]: one extra logit per head, no value
  float alibi_max_bias = 0.0f;      // ggml ALiBi slopes; bias = slope_h * (j - pos); 0 = off
  float* lse = nullptr;             // optional device [batch][nq][n_q_heads], natural log

  DotMode dot = DotMode::int8;
  int num_splits = 0;               // split-KV count; 0 = choose from the device and shape
  // Device scratch for split partials and, for long splits, claim counters (fa_workspace_bytes,
  // 16-byte aligned; no initialisation needed: the call zeroes its counters in the stream).
  // Null: a library buffer per device, grown on demand — calls in flight on several streams
  // at once must pass their own workspaces.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  int pdl = -1;                     // per-call PDL override: -1 = env/auto, 0 = off, 1 = on

  // ---- appended fields (ABI order) ----
  PagedKV paged;                    // block tables; page_size 0 = contiguous / strided cache
  int64_t mask_head_stride = 0;     // elements between q heads' masks; 0 = one mask for all heads
  AlibiMode alibi_mode = AlibiMode::position;
  int* errors = nullptr;            // optional device int32[kNumErrorCounters], added to
  // Optional host copy of kv_len[batch] (each in [0, max_kv_len]), read by the split planner
  // only: a batch then gets the split count that fills one round of the GPU when that pays
  // (docs/integration.md, "Batches"). The kernels still read kv_len; a stale copy costs speed,
  // never correctness. Engines have it (vLLM's seq_lens on the CPU, llama.cpp's n_kv).
  const int32_t* kv_len_host = nullptr;
};

// Which compiled kernel would run this call, and with how many splits (no launch).
struct KernelChoice {
  bool compiled = false;
  std::string name;      // instance name, e.g. "fa_packed16<d128,q8_0,int8,r16>"
  int rows_per_block = 0;
  int row_groups = 0;
  int num_splits = 0;
  std::string why_not;   // when !compiled
  std::string layout;    // "contiguous" or "paged<page_size>"
  bool claims = false;   // splits hand out chunks through claim counters (device/chunk_source.hpp)
  bool mma_qk = false;   // scores on tensor cores (NVIDIA mma) rather than lane = key dots
  // packed16 K enters the scores as fp16(k · block scale), one rounding a value, and the int8
  // mode's Q as fp16(q · its block scale / the row's largest) (the Hopper prefill kernel, decision
  // "prefill-k-rounded"; reference: RefMode::kernel_int8_k16 / kernel_f16_k16); false: the
  // exact integer products of each K scale block
  bool k_rounded = false;
  // The decode kernel loads Q 8 dims a lane in 16-byte loads (Q's pointer and strides 16-byte
  // aligned); false: 8 scalar loads a lane, or a prefill kernel (its own Q path)
  bool q_vec = false;
  std::string combine;   // "none" (one split), "wave" (a wave per row, < 16 splits), "row_block" (16..64) or "col_block" (> 64; "block" with PACKFA_COMBINE_COLS=0)
  // A/B switch, off unless its environment variable is set (=1; read once per process):
  bool split_rounds = false;  // PACKFA_SPLIT_ROUNDS: a batch's split count fills whole rounds of resident blocks
  bool one_round = false;     // the split count came from AttnParams::kv_len_host (one balanced round)
  // Splits share a sequence's keys when it holds at most a quarter of the plan's (decision
  // "splits-share-short-lengths", device/fa/rows.hpp): plans without kv_len_host; PACKFA_SHARE_LEN=0 turns it off.
  bool share_len = false;
  // Blocks of the chosen decode instance the device holds at once (multiprocessors x resident
  // blocks each): the round the split rules count in. 0 for prefill kernels.
  int64_t resident_slots = 0;
};

// Validates every field the kernels rely on; names the first bad one.
Status validate(const AttnParams& p);
// Kernel selection, separate from launching.
Status select_kernel(const AttnParams& p, int device, KernelChoice* out);
// Bytes of workspace the call needs (0 when it runs in one split).
Status fa_workspace_bytes(const AttnParams& p, int device, size_t* bytes);
// Attention forward on the given stream (cudaStream_t / hipStream_t, or null).
Status fa_packed16_forward(const AttnParams& p, void* stream);

// ---- pack-on-write -------------------------------------------------------------------------
// What pack_k_packed16 and quantize_v share: the new tokens to write and the cache slots they go to.
struct CacheWriteParams {
  int n_tokens = 0, n_kv_heads = 0, head_dim = 0;
  DType src_type = DType::f16;
  const void* src = nullptr;        // [token][kv_head][head_dim]
  int64_t src_token_stride = 0, src_head_stride = 0;  // elements
  const int32_t* slots = nullptr;   // device [n_tokens] slot of each token, or null:
  int64_t base_slot = 0;            //   slot = base_slot + token
  int pdl = -1;
  // Paged cache: slot = page id · page_size + offset (vLLM's slot_mapping); dst's
  // Strides.seq is the byte stride between pages. 0 = flat slots.
  int page_size = 0;
  int64_t n_slots = 0;              // slots in the cache (pages · page_size when paged); 0 = unchecked
  // slots[t] < 0 skips token t (vLLM's padding); slots >= n_slots (when set) are skipped too.
};

struct PackKParams : CacheWriteParams {
  KCache dst;                       // packed16 planes (seq stride unused)
  const float* smooth_shift = nullptr;  // optional m[n_kv_heads][head_dim]
  // dst.smooth_scale (optional) is s: the cache stores quantize((k - m) / s)
  int* counters = nullptr;          // optional device int[2]: nonfinite, overflow (added to)
};
Status pack_k_packed16(const PackKParams& p, void* stream);

struct QuantVParams : CacheWriteParams {
  VCache dst;                       // q8_0 or q4_0 (f16/bf16: converted copy)
};
Status quantize_v(const QuantVParams& p, void* stream);
// The checks pack_k_packed16 / quantize_v run before touching the device (also in builds
// without a GPU backend); the first bad field is named.
Status validate(const PackKParams& p);
Status validate(const QuantVParams& p);

// Backend facts for the demo and tests.
struct DeviceInfo {
  bool present = false;
  std::string backend;  // "cuda", "hip" or "none"
  std::string name;
  int multiprocessors = 0;
  int cc_major = 0, cc_minor = 0;
  std::string why_absent;
};
DeviceInfo device_info(int device = 0);

}  // namespace packfa
