/* The C ABI from plain C (forward, workspace query, pack K, quantize V): bad input gives a
 * code and a message naming the field, nothing throws, messages are always NUL-terminated.
 * Runs without a GPU (validation comes first). */
#include <stdio.h>
#include <string.h>

#include "packfa/c_api.h"

static int failures = 0;
#define EXPECT(cond)                                                  \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

static packfa_attn_params good(void) {
  static int32_t kv_len[1];
  packfa_attn_params p;
  memset(&p, 0, sizeof p);
  p.batch = 1; p.nq = 1; p.n_q_heads = 8; p.n_kv_heads = 2; p.head_dim = 128; p.max_kv_len = 64;
  p.q_type = 1; p.q = (const void*)0x10000; p.q_strides[0] = 1024; p.q_strides[1] = 1024; p.q_strides[2] = 128;
  p.o_type = 1; p.o = (void*)0x20000; p.o_strides[0] = 1024; p.o_strides[1] = 1024; p.o_strides[2] = 128;
  p.k_format = 0; p.k = (const void*)0x30000; p.k_strides[1] = 256; p.k_strides[2] = 128;
  p.k_scales = (const void*)0x40000; p.k_scale_strides[1] = 16; p.k_scale_strides[2] = 8; p.k_block = 32;
  p.v_format = 2; p.v = (const void*)0x50000; p.v_strides[1] = 272; p.v_strides[2] = 136;
  p.kv_len = kv_len; p.causal = 1; p.pdl = -1;
  return p;
}

int main(void) {
  char msg[256];
  packfa_attn_params p;
  EXPECT(packfa_version() != NULL && strlen(packfa_version()) > 0);

  EXPECT(packfa_fa_forward(NULL, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "params") != NULL);

  p = good();
  p.head_dim = 100;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "head_dim") != NULL);

  p = good();
  p.n_q_heads = 7;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "n_q_heads") != NULL);

  p = good();
  p.v_format = 9;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "v_format") != NULL);

  p = good();
  p.v_format = 5; /* one past q8_0_planar */
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "v_format") != NULL);

  /* q8_0_planar (4): 16-byte aligned int8 rows plus the appended v_scales plane. A null plane
   * is named; a bad stride in the last field proves the appended fields are mapped. */
  p = good();
  p.v_format = 4; p.v_strides[1] = 256; p.v_strides[2] = 128;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "v.scales") != NULL);
  p.v_scales = (const void*)0x58001;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "v.scales") != NULL);
  p.v_scales = (const void*)0x58000; p.v_scale_strides[1] = 16; p.v_scale_strides[2] = 9;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "v.scale_strides.head") != NULL);
  p.v_scale_strides[2] = 8; /* now valid: a later field is the first bad one */
  p.pdl = 5;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "pdl") != NULL);

  /* the last appended field: host lengths for the planner, checked against max_kv_len */
  {
    static const int32_t over[1] = {65};
    p = good();
    p.kv_len_host = over;
    EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "kv_len_host") != NULL);
  }

  p = good();
  p.k_block = 24;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "k.block") != NULL);

  p = good();
  p.k = (const void*)0x30008; /* payload rows must start 16-byte aligned */
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "k.data") != NULL);

  /* the appended fields reach validate(): paging, error counters, ALiBi mode */
  p = good();
  p.page_size = 48;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "paged.page_size") != NULL && strstr(msg, "(48)") != NULL);
  p.page_size = 16; /* 64 keys: 4 pages per sequence */
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "paged.block_table") != NULL);
  p.block_table = (const int32_t*)0x70000; p.block_table_stride = 3;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "paged.table_stride") != NULL);
  p = good();
  p.errors = (int*)0x90002;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "errors") != NULL);
  p = good();
  p.alibi_mode = 2;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "alibi_mode") != NULL);
  /* what the call writes may not overlap what it reads: O in place over Q, LSE inside O */
  p = good();
  p.o = (void*)p.q;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "o.data: overlaps q.data") != NULL);
  p = good();
  p.lse = (float*)0x20100;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "lse: overlaps o.data") != NULL);
  p = good();
  p.o_strides[2] = 64; /* heads written over each other */
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "o.head_stride") != NULL);

  /* a short buffer gets a truncated, terminated message */
  p = good();
  p.batch = 0;
  memset(msg, 'x', sizeof msg);
  EXPECT(packfa_fa_forward(&p, NULL, msg, 8) == 1);
  EXPECT(msg[7] == '\0' && strlen(msg) == 7);
  /* and no buffer at all is fine */
  EXPECT(packfa_fa_forward(&p, NULL, NULL, 0) == 1);

  /* workspace query: same validation, and the output pointer is checked */
  {
    size_t ws = 7;
    p = good();
    p.head_dim = 100;
    EXPECT(packfa_fa_workspace_bytes(&p, 0, &ws, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "head_dim") != NULL);
    p = good();
    EXPECT(packfa_fa_workspace_bytes(&p, 0, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "bytes") != NULL);
  }

  /* kernel query: same validation; the outputs are cleared first and left terminated */
  {
    char name[64];
    int splits = 7;
    memset(name, 'x', sizeof name);
    p = good();
    p.head_dim = 100;
    EXPECT(packfa_fa_select_kernel(&p, 0, name, sizeof name, &splits, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "head_dim") != NULL);
    EXPECT(name[0] == '\0' && splits == 0);
    EXPECT(packfa_fa_select_kernel(NULL, 0, name, sizeof name, &splits, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "params") != NULL);
    /* valid params: 0 with a name on a GPU; without one the forward call's error, and the name
       is still a terminated string; NULL outputs are allowed */
    p = good();
    memset(name, 'x', sizeof name);
    {
      const int rc = packfa_fa_select_kernel(&p, 0, name, sizeof name, &splits, msg, sizeof msg);
      EXPECT(memchr(name, '\0', sizeof name) != NULL);
      EXPECT(rc != 0 || (strncmp(name, "fa_", 3) == 0 && splits >= 1));
      EXPECT(rc == 0 || splits == 0);
      EXPECT(packfa_fa_select_kernel(&p, 0, NULL, 0, NULL, msg, sizeof msg) == rc);
    }
  }

  /* pack-on-write of K */
  {
    packfa_pack_k_params k;
    memset(&k, 0, sizeof k);
    k.n_tokens = 4; k.n_kv_heads = 2; k.head_dim = 128; k.src_type = 1; k.src = (const void*)0x10000;
    k.src_token_stride = 256; k.src_head_stride = 128;
    k.dst_payload = (void*)0x20000; k.dst_payload_strides[1] = 256; k.dst_payload_strides[2] = 128;
    k.dst_scales = (void*)0x30000; k.dst_scale_strides[1] = 16; k.dst_scale_strides[2] = 8;
    k.block = 32; k.pdl = -1;
    EXPECT(packfa_pack_k(NULL, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "params") != NULL);
    packfa_pack_k_params b = k;
    b.src_type = 5;
    EXPECT(packfa_pack_k(&b, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "src_type") != NULL);
    b = k;
    b.block = 24;
    EXPECT(packfa_pack_k(&b, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "dst.block") != NULL);
    b = k;
    b.dst_scales = NULL;
    EXPECT(packfa_pack_k(&b, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "dst.scales") != NULL);
    b = k;
    b.dst_payload_strides[1] = 264; /* payload rows must stay 16-byte aligned */
    EXPECT(packfa_pack_k(&b, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "dst.data_strides") != NULL);
    b = k;
    b.n_tokens = 0; /* nothing to do: success without touching a device */
    EXPECT(packfa_pack_k(&b, NULL, msg, sizeof msg) == 0);
  }

  /* quantize-on-write of V */
  {
    packfa_quantize_v_params v;
    memset(&v, 0, sizeof v);
    v.n_tokens = 4; v.n_kv_heads = 2; v.head_dim = 128; v.src_type = 1; v.src = (const void*)0x10000;
    v.src_token_stride = 256; v.src_head_stride = 128;
    v.v_format = 2; v.dst = (void*)0x20000; v.dst_strides[1] = 272; v.dst_strides[2] = 136; v.pdl = -1;
    packfa_quantize_v_params b = v;
    b.v_format = 8;
    EXPECT(packfa_quantize_v(&b, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "v_format") != NULL);
    b = v;
    b.v_format = 5;
    EXPECT(packfa_quantize_v(&b, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "v_format") != NULL);
    b = v;
    b.v_format = 4; b.dst_strides[1] = 256; b.dst_strides[2] = 128; /* q8_0_planar without dst_scales */
    EXPECT(packfa_quantize_v(&b, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "dst.scales") != NULL);
    b.dst_scales = (void*)0x30000; b.dst_scale_strides[1] = 16; b.dst_scale_strides[2] = 7;
    EXPECT(packfa_quantize_v(&b, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "dst.scale_strides") != NULL);
    b = v;
    b.head_dim = 80; /* q8_0 blocks need a multiple of 32 */
    EXPECT(packfa_quantize_v(&b, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "head_dim") != NULL);
    b = v;
    b.src = NULL;
    EXPECT(packfa_quantize_v(&b, NULL, msg, sizeof msg) == 1);
    EXPECT(strstr(msg, "src") != NULL);
    b = v;
    b.n_tokens = 0;
    EXPECT(packfa_quantize_v(&b, NULL, msg, sizeof msg) == 0);
  }

  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("C ABI: all checks passed\n");
  return 0;
}
