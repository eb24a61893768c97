/* Plain C99 over the installed C ABI: the version, a bad field named in the message, and a
 * valid call that either works (a GPU) or fails with a message naming the cause (no GPU). */
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

static packfa_attn_params good(void) {
  static int32_t kv_len[1] = {64};
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
  char msg[512];
  size_t bytes = 0;
  int rc;
  packfa_attn_params p = good();
  EXPECT(strcmp(packfa_version(), PACKFA_CONSUMER_VERSION) == 0);

  p.head_dim = 100;
  EXPECT(packfa_fa_forward(&p, NULL, msg, sizeof msg) == 1);
  EXPECT(strstr(msg, "head_dim") != NULL);

  /* A valid shape: the workspace query plans the split (device facts, no launch). */
  p = good();
  rc = packfa_fa_workspace_bytes(&p, 0, &bytes, msg, sizeof msg);
  if (rc == 0) {
    printf("workspace query on a GPU: %lu bytes\n", (unsigned long)bytes);
  } else {
    printf("workspace query without a GPU: code %d, %s\n", rc, msg);
    EXPECT(rc == 2 || rc == 4);  /* not_compiled (no backend) or device_error (no device) */
    EXPECT(strstr(msg, "GPU") != NULL || strstr(msg, "device") != NULL);  /* names the cause */
  }
  if (failures == 0) printf("packfa consumer_c OK (packfa %s)\n", packfa_version());
  return failures ? 1 : 0;
}
