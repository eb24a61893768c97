/* Plain C99 over the INSTALLED C ABI, written as a user would: the tensors of one decode step
 * are described from their shape (every stride and buffer size derived from the dims, buffers
 * laid out back to back), and the installed library must accept that layout. What this adds
 * to tests/api/test_c_api.c (the field-by-field validation suite, built in-tree): the
 * installed header and libpackfa_c.so link from a C-only project, the version matches the
 * CMake package, and a derived layout is valid. Without a GPU the workspace query then fails
 * with a message naming the cause; with one it returns the workspace size. */
#include <stdio.h>
#include <string.h>

#include <packfa/c_api.h>

static int failures = 0;
#define EXPECT(cond)                                                          \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "consumer_c: FAILED %s (line %d)\n", #cond, __LINE__);  \
      ++failures;                                                             \
    }                                                                         \
  } while (0)

/* The shape of one decode step: 2 sequences, GQA 4:1, head_dim 64, a 256-slot cache per
 * sequence; packed16 K with 32-wide blocks, q8_0 V, f16 Q and O. */
enum { BATCH = 2, NQ = 1, HQ = 4, HKV = 1, D = 64, SLOTS = 256, K_BLOCK = 32 };

/* Bump allocator of device-looking addresses: nothing is dereferenced without a GPU, and
 * validation only needs aligned, non-overlapping ranges of the right sizes. */
static uintptr_t next_addr = 0x100000;
static uintptr_t take(int64_t bytes) {
  const uintptr_t a = next_addr;
  next_addr += (uintptr_t)((bytes + 255) / 256 * 256);
  return a;
}

static packfa_attn_params decode_step(void) {
  static int32_t kv_len[BATCH] = {200, 256};
  const int64_t k_row = D;                         /* packed16 payload: one byte a value */
  const int64_t k_scale_row = 2 * (D / K_BLOCK);   /* one fp16 scale a block */
  const int64_t v_row = (D / 32) * 34;             /* q8_0: 32 int8 + an fp16 scale a block */
  packfa_attn_params p;
  memset(&p, 0, sizeof p);
  p.batch = BATCH; p.nq = NQ; p.n_q_heads = HQ; p.n_kv_heads = HKV; p.head_dim = D; p.max_kv_len = SLOTS;

  p.q_type = 1; /* f16, strides in elements {seq, row, head} */
  p.q_strides[2] = D; p.q_strides[1] = HQ * D; p.q_strides[0] = NQ * HQ * D;
  p.q = (const void*)take(2 * BATCH * p.q_strides[0]);
  p.o_type = 1;
  memcpy(p.o_strides, p.q_strides, sizeof p.o_strides);
  p.o = (void*)take(2 * BATCH * p.o_strides[0]);

  p.k_format = 0; p.k_block = K_BLOCK; /* byte strides {seq, slot, head} */
  p.k_strides[2] = k_row; p.k_strides[1] = HKV * k_row; p.k_strides[0] = SLOTS * p.k_strides[1];
  p.k = (const void*)take(BATCH * p.k_strides[0]);
  p.k_scale_strides[2] = k_scale_row; p.k_scale_strides[1] = HKV * k_scale_row;
  p.k_scale_strides[0] = SLOTS * p.k_scale_strides[1];
  p.k_scales = (const void*)take(BATCH * p.k_scale_strides[0]);

  p.v_format = 2;
  p.v_strides[2] = v_row; p.v_strides[1] = HKV * v_row; p.v_strides[0] = SLOTS * p.v_strides[1];
  p.v = (const void*)take(BATCH * p.v_strides[0]);

  p.kv_len = kv_len; p.causal = 1; p.pdl = -1;
  return p;
}

int main(void) {
  char msg[512];
  size_t bytes = 0;
  int rc;
  packfa_attn_params p = decode_step();
  EXPECT(strcmp(packfa_version(), PACKFA_CONSUMER_VERSION) == 0);

  /* A user's classic mistake, attention in place: O over Q is refused and named. */
  p.o = (void*)p.q;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "o.data") != NULL && strstr(msg, "q.data") != NULL);

  /* The derived layout passes validation (code 1 would name the field); what comes after is
   * the device: a workspace size on a GPU, the missing GPU named without one. */
  p = decode_step();
  rc = packfa_fa_workspace_bytes(&p, 0, &bytes, msg, sizeof msg);
  if (rc == 0) {
    printf("workspace query on a GPU: %lu bytes\n", (unsigned long)bytes);
  } else {
    printf("workspace query without a GPU: code %d, %s\n", rc, msg);
    EXPECT(rc == 2 || rc == 4); /* not_compiled (no backend) or device_error (no device) */
    EXPECT(strstr(msg, "GPU") != NULL || strstr(msg, "device") != NULL); /* names the cause */
  }
  if (failures == 0) printf("packfa consumer_c OK (packfa %s)\n", packfa_version());
  return failures ? 1 : 0;
}
