#!/usr/bin/env python3
"""A small Llama-architecture decoder with packfa in its decoding loop (issue 19, item 3).

    python3 examples/decode_loop.py --lib build/libpackfa_c.so [--out bench/results/]

Model: 2 layers, hidden 4096, 32 query / 8 KV heads of D = 128, RMSNorm, RoPE, SwiGLU MLP of
width 4096, vocabulary 32000, random weights from a fixed seed (nothing can be downloaded: the
figures show integration, speed and agreement, not model quality). One 4096-token prompt is
prefilled once with SDPA in fp16 (causal); its K / V go into both caches:
  (a) an fp16 cache [batch, kv_heads, slots, D], decode attention by torch SDPA;
  (b) packfa: packed16 K + q8_0 V caches [batch, slots, kv_heads, X] written with
      packfa.torch.pack_k_ / quantize_v_ (the prompt at once, then every new token: pack-on-write),
      decode attention by packfa.torch.attention.
Then 256 tokens are generated greedily with (a); (b) decodes the same tokens (teacher forced) for
per-step logits KLD(a || b) and top-1 agreement, and once more free-running for its own greedy
tokens. Each decode step (embedding, 2 layers, LM head, argmax) is one CUDA graph per path, so
tokens/s measures device work, not Python; the decode positions, slots and lengths live in device
tensors. In a graph, SDPA cannot slice the cache to the current length, so (a) attends over the
whole fp16 cache with an additive mask that hides the unwritten slots (as a static-cache torch
decoder does); (b) passes kv_len. With --no-graph both run eagerly ((a) then slices the cache).
Writes <gpu>-<date>-<commit>-decode_loop.json / .md to --out.
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def parse():
    ap = argparse.ArgumentParser(description="Llama-shaped decoder: SDPA fp16 cache vs packfa packed16 K + q8_0 V")
    ap.add_argument("--lib", default=None, help="libpackfa_c.so (default: $PACKFA_LIB, build/, build-gpu/)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--prompt", type=int, default=4096)
    ap.add_argument("--gen", type=int, default=256)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--ffn", type=int, default=4096, help="SwiGLU width (modest, to keep it fast)")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--v-format", default="q8_0", choices=("q8_0", "q4_0", "q8_0_planar", "f16"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-graph", action="store_true", help="eager decode steps (tokens/s then includes Python)")
    ap.add_argument("--commit", default=os.environ.get("PACKFA_COMMIT", ""))
    return ap.parse_args()


class Model:
    """Weights with std 1/sqrt(fan_in) (unit-variance activations); the query projection is
    scaled by 2 so attention is peaked rather than near-uniform, and the LM head by 2 so the
    next-token distribution has a clear top."""

    def __init__(self, a, dev, dtype=torch.float16):
        g = torch.Generator(device=dev).manual_seed(a.seed)
        self.a, self.dev, self.dt = a, dev, dtype
        H, G, D, E = a.heads, a.kv_heads, a.head_dim, a.hidden

        def w(rows, cols, gain=1.0):
            return (torch.randn(rows, cols, generator=g, device=dev) * (gain / math.sqrt(rows))).to(dtype)

        self.emb = torch.randn(a.vocab, E, generator=g, device=dev).to(dtype)
        self.layers = [dict(n1=torch.ones(E, device=dev, dtype=dtype), wq=w(E, H * D, 2.0), wk=w(E, G * D),
                            wv=w(E, G * D), wo=w(H * D, E), n2=torch.ones(E, device=dev, dtype=dtype),
                            w1=w(E, a.ffn), w3=w(E, a.ffn), w2=w(a.ffn, E)) for _ in range(a.layers)]
        self.norm = torch.ones(E, device=dev, dtype=dtype)
        self.lm = w(E, a.vocab, 2.0)
        cap = a.prompt + a.gen
        inv = 1.0 / (500000.0 ** (torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D))  # Llama 3 theta
        ang = torch.arange(cap, device=dev, dtype=torch.float32)[:, None] * inv[None, :]
        self.cos, self.sin = ang.cos(), ang.sin()  # [cap, D/2]

    @staticmethod
    def rmsnorm(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(w.dtype) * w

    def rope(self, x, cos, sin):
        """x [B, T, heads, D] (rotate-half, Llama); cos / sin [T, D/2]."""
        xf = x.float()
        x1, x2 = xf[..., : xf.shape[-1] // 2], xf[..., xf.shape[-1] // 2:]
        c, s = cos[None, :, None, :], sin[None, :, None, :]
        return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)

    def qkv(self, L, x, cos, sin):
        a = self.a
        B, T, _ = x.shape
        h = self.rmsnorm(x, L["n1"])
        q = (h @ L["wq"]).view(B, T, a.heads, a.head_dim)
        k = (h @ L["wk"]).view(B, T, a.kv_heads, a.head_dim)
        v = (h @ L["wv"]).view(B, T, a.kv_heads, a.head_dim)
        return self.rope(q, cos, sin), self.rope(k, cos, sin), v

    def finish(self, L, x, o):
        B, T = x.shape[:2]
        x = x + o.reshape(B, T, -1) @ L["wo"]
        h = self.rmsnorm(x, L["n2"])
        return x + (F.silu(h @ L["w1"]) * (h @ L["w3"])) @ L["w2"]

    def logits(self, x):
        return (self.rmsnorm(x, self.norm) @ self.lm).float()


def sdpa_causal_gqa(q, k, v):
    """Prefill attention: q [B, T, H, D], k / v [B, T, G, D], causal, fp16. enable_gqa where torch has it."""
    qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    rep = qh.shape[1] // kh.shape[1]
    try:
        o = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, enable_gqa=rep > 1)
    except TypeError:  # torch < 2.5
        o = F.scaled_dot_product_attention(qh, kh.repeat_interleave(rep, 1), vh.repeat_interleave(rep, 1),
                                           is_causal=True)
    return o.transpose(1, 2)


def sdpa_decode(q, kc, vc, mask):
    """One decode row per sequence: q [B, 1, H, D], caches [B, G, L, D]; GQA by folding the
    query heads of a KV head into its query rows (exact: no causal mask within a step)."""
    B, _, H, D = q.shape
    G = kc.shape[1]
    qf = q.reshape(B, G, H // G, D)
    o = F.scaled_dot_product_attention(qf, kc, vc, attn_mask=mask)
    return o.reshape(B, 1, H, D)


def decode_step(st, path):
    """One decode row per sequence at position st["pos"] for input tokens st["tok"]: path "a" writes
    the fp16 cache and runs SDPA, path "b" packs K / quantizes V into packfa's cache and runs
    packfa; logits into st["out_logits"][path]. Only device tensors change between calls."""
    m, tok, pos, cap, eager = st["m"], st["tok"], st["pos"], st["cap"], st["eager"]
    B = tok.shape[0]
    x = m.emb[tok][:, None]  # [B, 1, E]
    cos, sin = m.cos[pos], m.sin[pos]
    if path == "a":
        mask = None if eager else st["zmask"].masked_fill(st["ar"] > pos, float("-inf")).view(1, 1, 1, cap)
        p = int(pos.item()) if eager else None
    else:
        st["slot_t"].copy_(st["base"] + pos.to(torch.int32))
        st["kvlen_t"].copy_((pos + 1).to(torch.int32).expand(B))
    for li, L in enumerate(m.layers):
        q, k, v = m.qkv(L, x, cos, sin)
        if path == "a":
            kc, vc = st["kA"][li], st["vA"][li]
            kc.index_copy_(2, pos, k.transpose(1, 2))
            vc.index_copy_(2, pos, v.transpose(1, 2))
            o = sdpa_decode(q, kc[:, :, :p + 1], vc[:, :, :p + 1], None) if eager else sdpa_decode(q, kc, vc, mask)
        else:
            c, pft, vf = st["cB"][li], st["pft"], st["v_format"]
            pft.pack_k_(k[:, 0], c["k_cache"], c["k_scales"], st["slot_t"])
            pft.quantize_v_(v[:, 0], c["v_cache"], st["slot_t"], v_format=vf, v_scales=c["v_scales"])
            o = pft.attention(q, c["k_cache"], c["k_scales"], c["v_cache"], st["kvlen_t"], v_scales=c["v_scales"],
                              v_format=vf, max_kv_len=cap)
        x = m.finish(L, x, o)
    st["out_logits"][path].copy_(m.logits(x)[:, 0])


def git_commit(a):
    if a.commit:
        return a.commit
    try:
        c = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                           timeout=10).stdout.strip()
        return c or "unknown"
    except Exception:  # noqa: BLE001
        return "unknown"


def main():
    a = parse()
    t_start = time.time()
    if not torch.cuda.is_available():
        print("decode_loop: no CUDA device")
        return 2
    import packfa.torch as pft
    pft.load_library(a.lib)
    dev = torch.device("cuda", torch.cuda.current_device())
    B, T, N = a.batch, a.prompt, a.gen
    H, G, D, cap = a.heads, a.kv_heads, a.head_dim, a.prompt + a.gen
    m = Model(a, dev)
    nl = a.layers

    # ---- caches ---------------------------------------------------------------------------------------
    kA = [torch.zeros(B, G, cap, D, device=dev, dtype=torch.float16) for _ in range(nl)]
    vA = [torch.zeros(B, G, cap, D, device=dev, dtype=torch.float16) for _ in range(nl)]
    cB = [pft.alloc_cache(cap, G, D, a.v_format, batch=B, device=dev) for _ in range(nl)]
    for c in cB:
        for key in ("k_cache", "k_scales", "v_cache", "v_scales"):
            if c[key] is not None:
                c[key].zero_()
    bytes_a = sum(t.numel() * t.element_size() for t in kA + vA)
    bytes_b = sum(c[k].numel() * c[k].element_size() for c in cB for k in ("k_cache", "k_scales", "v_cache", "v_scales")
                  if c[k] is not None)

    # ---- prefill (SDPA fp16), both caches written from its K / V ------------------------------------------
    g = torch.Generator(device=dev).manual_seed(a.seed + 1)
    prompt = torch.randint(0, a.vocab, (B, T), generator=g, device=dev)
    torch.cuda.synchronize()
    t0 = time.time()
    with torch.no_grad():
        x = m.emb[prompt]
        cos, sin = m.cos[:T], m.sin[:T]
        slots = (torch.arange(B, device=dev)[:, None] * cap + torch.arange(T, device=dev)[None, :]).reshape(-1)
        slots = slots.to(torch.int32)
        for li, L in enumerate(m.layers):
            q, k, v = m.qkv(L, x, cos, sin)
            kA[li][:, :, :T] = k.transpose(1, 2)
            vA[li][:, :, :T] = v.transpose(1, 2)
            c = cB[li]
            pft.pack_k_(k.reshape(B * T, G, D), c["k_cache"], c["k_scales"], slots)
            pft.quantize_v_(v.reshape(B * T, G, D), c["v_cache"], slots, v_format=a.v_format, v_scales=c["v_scales"])
            x = m.finish(L, x, sdpa_causal_gqa(q, k, v))
        first = m.logits(x[:, -1:])[:, 0].argmax(-1)  # [B]
    torch.cuda.synchronize()
    t_prefill = time.time() - t0

    # ---- one decode step per path, on device tensors ----------------------------------------------------------
    tok = torch.zeros(B, dtype=torch.long, device=dev)      # input token of the step
    pos = torch.zeros(1, dtype=torch.long, device=dev)      # its position
    out_logits = {"a": torch.zeros(B, a.vocab, device=dev), "b": torch.zeros(B, a.vocab, device=dev)}
    base = (torch.arange(B, device=dev) * cap).to(torch.int32)
    slot_t = torch.zeros(B, dtype=torch.int32, device=dev)
    kvlen_t = torch.zeros(B, dtype=torch.int32, device=dev)
    ar = torch.arange(cap, device=dev)
    zmask = torch.zeros(cap, device=dev, dtype=torch.float16)
    eager = a.no_graph

    st = dict(m=m, tok=tok, pos=pos, kA=kA, vA=vA, cB=cB, out_logits=out_logits, base=base, slot_t=slot_t,
              kvlen_t=kvlen_t, ar=ar, zmask=zmask, v_format=a.v_format, cap=cap, eager=eager, pft=pft)

    def step(path):
        decode_step(st, path)

    graphs = {}
    if not eager:
        tok.copy_(first)
        pos.fill_(T)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():  # warm-up (cuBLAS workspaces, packfa's lazy set-up)
            for path in ("a", "b"):
                step(path)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        for path in ("a", "b"):
            graphs[path] = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graphs[path]), torch.no_grad():
                step(path)

    def run(path, forced=None):
        """N steps; forced: [N, B] input tokens (teacher forcing), else greedy from `first`."""
        logits = torch.empty(N, B, a.vocab, device=dev)
        toks = torch.empty(N + 1, B, dtype=torch.long, device=dev)
        toks[0] = first
        torch.cuda.synchronize()
        t0 = time.time()
        with torch.no_grad():
            for i in range(N):
                tok.copy_(forced[i] if forced is not None else toks[i])
                pos.fill_(T + i)
                if eager:
                    step(path)
                else:
                    graphs[path].replay()
                logits[i].copy_(out_logits[path])
                toks[i + 1] = out_logits[path].argmax(-1)
        torch.cuda.synchronize()
        return logits, toks, time.time() - t0

    logits_a, toks_a, t_a = run("a")
    logits_bf, _, t_bf = run("b", forced=toks_a[:N])
    logits_b, toks_b, t_b = run("b")

    # ---- agreement ----------------------------------------------------------------------------------------------
    la, lb = F.log_softmax(logits_a, -1), F.log_softmax(logits_bf, -1)
    kld = (la.exp() * (la - lb)).sum(-1)  # [N, B], nats
    kld_steps = kld.mean(-1)
    top1 = (logits_bf.argmax(-1) == logits_a.argmax(-1)).float().mean().item()
    free_same = (toks_b[1:] == toks_a[1:]).all(-1)  # [N]
    first_div = int((~free_same).nonzero()[0].item()) if bool((~free_same).any()) else None
    free_agree = (toks_b[1:] == toks_a[1:]).float().mean().item()

    # ---- attention alone, both paths (a graph of every layer's attention call at the last position) ---------------
    att = {}
    if not eager:
        qs = [torch.randn(B, 1, H, D, device=dev).half() for _ in range(nl)]
        pos.fill_(cap - 1)
        kvlen_t.fill_(cap)
        mask = torch.zeros(1, 1, 1, cap, device=dev, dtype=torch.float16)

        def att_a():
            for li in range(nl):
                sdpa_decode(qs[li], kA[li], vA[li], mask)

        def att_b():
            for li in range(nl):
                c = cB[li]
                pft.attention(qs[li], c["k_cache"], c["k_scales"], c["v_cache"], kvlen_t, v_scales=c["v_scales"],
                              v_format=a.v_format, max_kv_len=cap)

        for name, fn in (("a", att_a), ("b", att_b)):
            fn()
            torch.cuda.synchronize()
            gr = torch.cuda.CUDAGraph()
            with torch.cuda.graph(gr):
                for _ in range(10):
                    fn()
            ts = []
            for _ in range(23):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                gr.replay()
                e1.record()
                torch.cuda.synchronize()
                ts.append(e0.elapsed_time(e1) * 1e3 / 10 / nl)
            att[name] = sorted(ts[3:])[len(ts[3:]) // 2]
            del gr

    # ---- report ---------------------------------------------------------------------------------------------
    prop = torch.cuda.get_device_properties(dev)
    commit = git_commit(a)
    now = datetime.datetime.now(datetime.timezone.utc)
    mib = 1 << 20
    res = dict(
        gpu=prop.name, date=now.strftime("%Y-%m-%dT%H:%M:%SZ"), commit=commit, torch=torch.__version__,
        model=dict(layers=nl, hidden=a.hidden, n_q_heads=H, n_kv_heads=G, head_dim=D, ffn=a.ffn, vocab=a.vocab,
                   seed=a.seed, weights="random, std 1/sqrt(fan_in), q and LM head x2"),
        batch=B, prompt=T, generated=N, v_format=a.v_format, cuda_graphs=not eager,
        prefill_s=round(t_prefill, 4),
        tokens_per_s=dict(sdpa_fp16=B * N / t_a, packfa=B * N / t_b, packfa_teacher_forced=B * N / t_bf),
        step_ms=dict(sdpa_fp16=1e3 * t_a / N, packfa=1e3 * t_b / N),
        attention_us_per_layer_call=dict(sdpa_fp16=att.get("a"), packfa=att.get("b")),
        kv_bytes=dict(sdpa_fp16=bytes_a, packfa=bytes_b, ratio=bytes_b / bytes_a, slots=cap),
        kld_nats=dict(mean=kld_steps.mean().item(), median=kld_steps.median().item(), max=kld_steps.max().item(),
                      p99=torch.quantile(kld_steps, 0.99).item()),
        top1_agreement_teacher_forced=top1,
        free_running=dict(token_agreement=free_agree, first_divergence_step=first_div),
        kld_per_step=[round(x, 8) for x in kld_steps.tolist()],
        method=("prefill once by SDPA fp16 (causal), its K/V written to both caches (packfa by pack_k_/quantize_v_); "
                "(a) greedy with SDPA over the fp16 cache%s; (b) packfa over packed16 K + %s V, pack-on-write each "
                "step, teacher forced on (a)'s tokens for KLD(a||b) of the next-token distribution and top-1 "
                "agreement, then free-running greedy; %s" % (
                    "" if eager else " (whole cache, additive mask of the unwritten slots)", a.v_format,
                    "eager steps" if eager else "one CUDA graph per decode step and path")),
        wall_s=round(time.time() - t_start, 1))
    tag = "h200" if "H200" in prop.name else "".join(ch if ch.isalnum() else "-" for ch in prop.name.lower()).strip("-")
    stem = os.path.join(a.out, "%s-%s-%s-decode_loop" % (tag, now.strftime("%Y-%m-%d"), commit))
    os.makedirs(a.out, exist_ok=True)
    with open(stem + ".json", "w") as f:
        json.dump(res, f, indent=1)
    tp, ab = res["tokens_per_s"], res["attention_us_per_layer_call"]
    md = [
        "# decode_loop: SDPA fp16 cache vs packfa packed16 K + %s V" % a.v_format, "",
        "%s, %s, commit %s, torch %s. %d layers, hidden %d, %d/%d heads, D %d, SwiGLU %d, vocab %d, random weights "
        "(seed %d); batch %d, prompt %d, %d generated tokens%s." % (
            prop.name, res["date"], commit, torch.__version__, nl, a.hidden, H, G, D, a.ffn, a.vocab, a.seed, B, T, N,
            "" if eager else ", one CUDA graph per decode step"), "",
        "| | SDPA fp16 cache | packfa |", "|---|---|---|",
        "| tokens/s | %.0f | %.0f |" % (tp["sdpa_fp16"], tp["packfa"]),
        "| ms per step | %.3f | %.3f |" % (res["step_ms"]["sdpa_fp16"], res["step_ms"]["packfa"]),
        "| attention µs per layer call (at %d keys) | %s | %s |" % (
            cap, "%.1f" % ab["sdpa_fp16"] if ab["sdpa_fp16"] else "-", "%.1f" % ab["packfa"] if ab["packfa"] else "-"),
        "| KV cache (%d slots, %d layers) | %.1f MiB | %.1f MiB (%.1f%%) |" % (
            cap, nl, bytes_a / mib, bytes_b / mib, 100 * bytes_b / bytes_a), "",
        "Agreement of packfa with the fp16 path (teacher forced on its %d tokens): next-token KLD mean %.2e, "
        "median %.2e, p99 %.2e, max %.2e nats; top-1 agreement %.1f%%. Free-running greedy: %.1f%% of tokens equal, "
        "first divergence at step %s." % (
            N, res["kld_nats"]["mean"], res["kld_nats"]["median"], res["kld_nats"]["p99"], res["kld_nats"]["max"],
            100 * top1, 100 * free_agree, first_div if first_div is not None else "none"), "",
        "Method: " + res["method"] + ". Prefill %.2f s. Random weights: the figures show integration, speed and "
        "agreement, not model quality." % t_prefill]
    with open(stem + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    print("decode_loop: wrote %s.json / .md (%.1f s)" % (stem, time.time() - t_start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
