"""The peers of kvkit's GPU ops, timed on the same GPU in the same device session.

PyTorch eager versions of each op (our own code, written from SEMANTICS.md),
cuBLAS through torch.mm for the projection, a PyTorch copy as the bandwidth
ceiling, and, when a copy of SGLang's fused_kv_materialize.py is given with
--sglang (fetched beside the repository, never committed), its Triton kernel.
pagedAttention: PyTorch's scaled_dot_product_attention on the K/V rows gathered
from the pool, and, given SGLang's Triton decode attention with --sglang-decode
(its triton_ops/decode_attention.py with get_num_kv_splits_triton from
metadata.py, in one file outside the repository), that kernel.

    python3 bench/peers/torch_peers.py --out peers.json [--sglang path/to/fused_kv_materialize.py] [--sglang-decode path/to/decode_attention.py]

Writes {"ceilings": [...], "rows": [...], "notes": [...]} in the schema of
bench/src/results.ts, which `pnpm bench --peers peers.json` merges.
"""

import argparse
import importlib.util
import json

import torch
import torch.nn.functional as F
import triton.testing

BF16 = 2
F32 = 4
INDEX = 4
CACHE_ROWS = 65536
TOKENS = (16, 256, 4096, 32768)
MODELS = ((5, 8, 128, 128), (5, 8, 128, 64), (1, 8, 128, 128), (1, 8, 128, 64), (5, 4, 64, 32))
# pagedAttention rows as bench/src/shapes.ts has them: query heads, KV heads, head dim; (requests, cached tokens each).
PAGED_HEADS = (32, 8, 128)
PAGED_DECODE = (64, 4096)
PAGED_LONG = (1, 131072)
VERIFY_QUERIES = 8
PAGE_SIZE = 16
# SGLang's default --triton-attention-num-kv-splits: the most splits its decode kernel takes a request.
SGLANG_MAX_KV_SPLITS = 8


def median_us(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3


def cos_sin_cache(rows, rotary_dim, base=10000.0):
    freqs = base ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    angles = torch.arange(rows, dtype=torch.float64)[:, None] * freqs[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).float().cuda()


def positions(n, seed=0):
    return ((torch.arange(n, dtype=torch.int64) * 7919 + seed * 104729) % CACHE_ROWS).cuda()


def rotate(x, cos, sin, rotary_dim):
    """NeoX pairing (j, j + R/2); the tail past rotary_dim passes through."""
    half = rotary_dim // 2
    x1, x2, tail = x[..., :half], x[..., half:rotary_dim], x[..., rotary_dim:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, tail], dim=-1)


def norm_rope_eager(kv, weight, eps, cache, pos, heads, head_dim, rotary_dim):
    tokens, layers, _ = kv.shape
    k = kv[:, :, : heads * head_dim].reshape(tokens, layers, heads, head_dim).float()
    v = kv[:, :, heads * head_dim :].reshape(tokens, layers, heads, head_dim)
    inv = torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + eps.view(1, layers, 1, 1))
    normed = k * inv * weight.float().view(1, layers, 1, head_dim)
    rows = cache[pos]
    half = rotary_dim // 2
    cos, sin = rows[:, :half].view(tokens, 1, 1, half), rows[:, half:].view(tokens, 1, 1, half)
    k_out = rotate(normed, cos, sin, rotary_dim).to(kv.dtype).permute(1, 0, 2, 3).contiguous()
    v_out = v.permute(1, 0, 2, 3).contiguous()
    return k_out, v_out


def rope_pool_eager(q, k, v, pos, slots, k_pool, v_pool, rotary_dim, base=10000.0):
    half = rotary_dim // 2
    freqs = base ** (-torch.arange(0, rotary_dim, 2, device=q.device, dtype=torch.float32) / rotary_dim)
    angles = pos.float()[:, None] * freqs[None, :]
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
    q_rot = rotate(q.float(), cos, sin, rotary_dim).to(q.dtype)
    k_rot = rotate(k.float(), cos, sin, rotary_dim).to(k.dtype)
    keep = slots >= 0
    k_pool[slots[keep]] = k_rot[keep]
    v_pool[slots[keep]] = v[keep]
    return q_rot, k_rot


def row(op, impl, shape, us, nbytes, flops, ceiling, fraction, method, reference=None, variant=None):
    gbs = nbytes / us / 1e3 if nbytes else None
    tflops = flops / us / 1e6 if flops else None
    r = {"op": op, "impl": impl, "dtype": "bf16", "shape": shape, "us": us, "bytes": nbytes, "flops": flops,
         "gbs": gbs, "tflops": tflops, "ceiling": ceiling, "fraction": fraction, "method": method}
    if variant:
        r["variant"] = variant  # what the row runs beyond the op's plain form, as the bench labels it
    if reference:
        r["reference"] = reference  # the row of this run and shape the fraction divides by
    return r


def paged_shape(requests, kv_len):
    hq, h, d = PAGED_HEADS
    return {"B": requests, "kvLen": kv_len, "Hq": hq, "H": h, "D": d}


def paged_bytes(requests, kv_len, q_len, fp8):
    """As bench/src/traffic.ts counts them: q read, out and lse written, every cached K and V row once, slots, offsets."""
    hq, h, d = PAGED_HEADS
    n, c = requests * q_len, requests * kv_len
    kv = 2 * (c * h * d * (1 if fp8 else BF16) + (h * F32 if fp8 else 0))
    return 2 * n * hq * d * BF16 + n * hq * F32 + kv + c * INDEX + 2 * (requests + 1) * INDEX


def gather_rows(pool, slots, scale, hnd):
    """The pool's rows at `slots` as [C, H, D] bf16: an HND pool [pages, H, PAGE_SIZE, D] by page and row, fp8 codes
    (held as uint8) decoded times the per-head scale."""
    rows = pool[slots // PAGE_SIZE, :, slots % PAGE_SIZE] if hnd else pool[slots]
    if scale is None:
        return rows
    return rows.view(torch.float8_e4m3fn).to(torch.bfloat16) * scale.view(1, -1, 1)


def sdpa_supports_gqa():
    q = torch.zeros(1, 4, 1, 8, dtype=torch.bfloat16, device="cuda")
    kv = torch.zeros(1, 2, 3, 8, dtype=torch.bfloat16, device="cuda")
    try:
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        return True
    except TypeError:
        return False


def sdpa_paged(q, k_pool, v_pool, slots, requests, kv_len, q_len, scales, hnd, gqa, mask):
    """Each request's K and V gathered from the pool, then one batched SDPA (every request has kvLen tokens here):
    the request's queries at its last q_len positions, so the causal mask is aligned to the bottom right."""
    hq, h, d = PAGED_HEADS
    k = gather_rows(k_pool, slots, scales[0], hnd).view(requests, kv_len, h, d).transpose(1, 2)
    v = gather_rows(v_pool, slots, scales[1], hnd).view(requests, kv_len, h, d).transpose(1, 2)
    if not gqa:
        k, v = k.repeat_interleave(hq // h, dim=1), v.repeat_interleave(hq // h, dim=1)
    out = F.scaled_dot_product_attention(q.view(requests, q_len, hq, d).transpose(1, 2), k, v, attn_mask=mask,
                                         **({"enable_gqa": True} if gqa else {}))
    return out.transpose(1, 2).reshape(requests * q_len, hq, d)


def sglang_decode(module, q, k_buffer, v_buffer, slots, requests, kv_len, k_scale, v_scale):
    """SGLang's Triton decode attention as its Triton backend calls it: q [B, Hq, D], token-major K/V buffers
    [S, H, D] (page size 1), kv_indptr (i32) and kv_indices (i64, the slots), num_kv_splits per request from
    get_num_kv_splits_triton at the server's default cap, attn_logits [B, Hq, splits, D] and attn_lse [B, Hq, splits]
    f32; per-tensor k_scale and v_scale. The split counts and buffers are made once per batch, outside the timing."""
    hq, h, d = PAGED_HEADS
    kv_indptr = torch.arange(0, (requests + 1) * kv_len, kv_len, dtype=torch.int32, device="cuda")
    kv_indices = slots.to(torch.int64)
    seq_lens = torch.full((requests,), kv_len, dtype=torch.int32, device="cuda")
    num_kv_splits = torch.empty(requests, dtype=torch.int32, device="cuda")
    cores = torch.cuda.get_device_properties(0).multi_processor_count
    schedule = 256 if requests < 256 else triton.next_power_of_2(requests)
    module.get_num_kv_splits_triton[(1,)](num_kv_splits, seq_lens, requests, 1, hq, h, SGLANG_MAX_KV_SPLITS, cores, MAX_NUM_SEQ=schedule)
    attn_logits = torch.empty(requests, hq, SGLANG_MAX_KV_SPLITS, d, dtype=torch.float32, device="cuda")
    attn_lse = torch.empty(requests, hq, SGLANG_MAX_KV_SPLITS, dtype=torch.float32, device="cuda")
    o = torch.empty(requests, hq, d, dtype=torch.bfloat16, device="cuda")
    qq = q.view(requests, hq, d)

    def run():
        module.decode_attention_fwd(qq, k_buffer, v_buffer, o, kv_indptr, kv_indices, attn_logits, attn_lse,
                                    num_kv_splits, SGLANG_MAX_KV_SPLITS, d ** -0.5, k_scale, v_scale)
        return o

    return run, num_kv_splits


def paged_rows(decode_module, copy_gbs, method, notes):
    """pagedAttention: torch-sdpa on every row of the bench (each pool kind, scattered slots, verification, the long
    request); sglang-triton, where given, on the rows its decode kernel takes (token-major pools, one query a request)."""
    rows = []
    hq, h, d = PAGED_HEADS
    requests, kv_len = PAGED_DECODE
    slots_total = max(requests * kv_len, PAGED_LONG[0] * PAGED_LONG[1])
    slots_total = -(-slots_total // PAGE_SIZE) * PAGE_SIZE
    k_pool = torch.empty(slots_total, h, d, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    v_pool = torch.empty_like(k_pool).uniform_(-1, 1)
    scales = [(0.05 + torch.rand(h, device="cuda") / 8).to(torch.bfloat16) for _ in range(2)]
    k_fp8, v_fp8 = [(p.float() / s.float().view(1, h, 1)).to(torch.float8_e4m3fn).view(torch.uint8) for p, s in ((k_pool, scales[0]), (v_pool, scales[1]))]
    hnd = lambda pool: pool.view(slots_total // PAGE_SIZE, h, PAGE_SIZE, d)  # the same storage, read as pages
    run_of = lambda n, length: torch.arange(n * length, device="cuda")  # each request a run of slots of its own
    scattered = torch.randperm(slots_total, device="cuda")[: requests * kv_len]
    gqa = sdpa_supports_gqa()
    if not gqa:
        notes.append("torch-sdpa: this PyTorch's scaled_dot_product_attention has no enable_gqa; K and V heads are repeated to the query heads")

    def sdpa_row(n, length, variant, q_len=1, fp8=False, paged=False, slots=None, reference=None, ref_us=None):
        slots = run_of(n, length) if slots is None else slots
        q = torch.empty(n * q_len, hq, d, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
        kp, vp = (k_fp8, v_fp8) if fp8 else (k_pool, v_pool)
        if paged:
            kp, vp = hnd(kp), hnd(vp)
        mask = torch.ones(q_len, length, dtype=torch.bool, device="cuda").tril(length - q_len) if q_len > 1 else None
        us = median_us(lambda: sdpa_paged(q, kp, vp, slots, n, length, q_len, scales if fp8 else (None, None), paged, gqa, mask))
        nbytes = paged_bytes(n, length, q_len, fp8)
        if reference:
            rows.append(row("pagedAttention", "torch-sdpa", paged_shape(n, length), us, nbytes, 0, "decode", ref_us / us, method, reference, variant))
        else:
            rows.append(row("pagedAttention", "torch-sdpa", paged_shape(n, length), us, nbytes, 0, "torch-copy", nbytes / us / 1e3 / copy_gbs, method, variant=variant))
        return us

    decode_us = sdpa_row(requests, kv_len, None)
    sdpa_row(requests, kv_len, "HND pool", paged=True)
    sdpa_row(requests, kv_len, "fp8e4m3 pool", fp8=True)
    sdpa_row(requests, kv_len, "fp8e4m3 HND pool", fp8=True, paged=True)
    sdpa_row(requests, kv_len, "scattered slots", slots=scattered)
    sdpa_row(requests, kv_len, f"verification, {VERIFY_QUERIES} queries", q_len=VERIFY_QUERIES,
             reference={"op": "pagedAttention", "impl": "torch-sdpa"}, ref_us=decode_us)
    sdpa_row(*PAGED_LONG, None)

    if decode_module is None:
        notes.append("sglang-triton pagedAttention: not measured (no copy of SGLang's decode_attention.py was given)")
        return rows
    notes.append(f"sglang-triton pagedAttention: SGLang's decode kernel at its default cap of {SGLANG_MAX_KV_SPLITS} KV splits a request, "
                 "the split counts from its get_num_kv_splits_triton; its fp8 pool takes one scale a pool (the kernel's form), not one a head; "
                 "no HND or verification rows (its decode kernel reads token-major pools, one query a request)")
    fp8_scale = [float(s.float().mean()) for s in scales]
    for n, length, variant, fp8, slots in ((requests, kv_len, None, False, None), (requests, kv_len, "fp8e4m3 pool", True, None),
                                          (requests, kv_len, "scattered slots", False, scattered), (*PAGED_LONG, None, False, None)):
        slots = run_of(n, length) if slots is None else slots
        q = torch.empty(n, hq, d, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
        kb, vb = (k_fp8.view(torch.float8_e4m3fn), v_fp8.view(torch.float8_e4m3fn)) if fp8 else (k_pool, v_pool)
        run, splits = sglang_decode(decode_module, q, kb, vb, slots, n, length, *(fp8_scale if fp8 else (1.0, 1.0)))
        if variant is None and n == requests:
            # The kernel against SDPA on the same problem, before it is timed.
            want = sdpa_paged(q, k_pool, v_pool, slots, n, length, 1, (None, None), False, gqa, None).float()
            err = ((run().float() - want).norm() / want.norm()).item()
            notes.append(f"sglang-triton pagedAttention B={n} kvLen={length}: relative L2 distance {err:.2e} from torch-sdpa; {int(splits[0])} KV splits a request")
        us = median_us(run)
        nbytes = paged_bytes(n, length, 1, fp8)
        rows.append(row("pagedAttention", "sglang-triton", paged_shape(n, length), us, nbytes, 0, "torch-copy", nbytes / us / 1e3 / copy_gbs, method, variant=variant))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--sglang", help="path to SGLang's fused_kv_materialize.py, run from outside the repository")
    parser.add_argument("--sglang-decode", help="path to SGLang's triton_ops/decode_attention.py (with get_num_kv_splits_triton), run from outside the repository")
    args = parser.parse_args()
    torch.manual_seed(0)
    notes = []
    triton_fn = None
    if args.sglang:
        spec = importlib.util.spec_from_file_location("sglang_fused_kv_materialize", args.sglang)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        triton_fn = module._fused_norm_rope_stacked
    else:
        notes.append("sglang-triton: not measured (no copy of fused_kv_materialize.py was given)")
    decode_module = None
    if args.sglang_decode:
        spec = importlib.util.spec_from_file_location("sglang_decode_attention", args.sglang_decode)
        decode_module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(decode_module)

    src = torch.empty(1 << 29, dtype=torch.float16, device="cuda").uniform_(-1, 1)
    dst = torch.empty_like(src)
    copy_us = median_us(lambda: dst.copy_(src))
    copy_gbs = 2 * src.numel() * 2 / copy_us / 1e3
    del src, dst
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    mm_tflops = 2 * 8192**3 / median_us(lambda: torch.mm(a, b)) / 1e6
    del a, b
    ceilings = [
        {"name": "torch-copy", "backend": "torch", "unit": "GB/s", "value": copy_gbs},
        {"name": "torch-mm", "backend": "torch", "unit": "TFLOP/s", "value": mm_tflops, "shape": {"M": 8192, "N": 8192, "K": 8192}},
    ]
    rows = []
    method = "triton.testing.do_bench median"

    for layers, heads, head_dim, rotary_dim in MODELS:
        cache = cos_sin_cache(CACHE_ROWS, rotary_dim)
        weight = torch.randn(layers, head_dim, dtype=torch.bfloat16, device="cuda")
        eps = torch.full((layers,), 1e-6, dtype=torch.float32, device="cuda")
        for tokens in TOKENS:
            kv = torch.empty(tokens, layers, 2 * heads * head_dim, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
            pos = positions(tokens)
            shape = {"L": layers, "H": heads, "D": head_dim, "R": rotary_dim, "T": tokens}
            nbytes = 2 * kv.numel() * BF16 + tokens * INDEX + layers * head_dim * BF16 + layers * F32 + min(tokens, CACHE_ROWS) * rotary_dim * F32
            impls = [("torch-eager", lambda: norm_rope_eager(kv, weight, eps, cache, pos, heads, head_dim, rotary_dim))]
            if triton_fn is not None:
                impls.append(("sglang-triton", lambda: triton_fn(kv, weight, eps, cache, pos, heads, head_dim, rotary_dim)))
            for impl, fn in impls:
                us = median_us(fn)
                rows.append(row("fusedNormRopeStacked", impl, shape, us, nbytes, 0, "torch-copy", nbytes / us / 1e3 / copy_gbs, method))

    for rotary_dim in (128, 64):
        for tokens in TOKENS:
            q = torch.empty(tokens, 32, 128, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
            k = torch.empty(tokens, 8, 128, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
            v = torch.empty_like(k).uniform_(-1, 1)
            pos = positions(tokens)
            slots = ((torch.arange(tokens, dtype=torch.int64) * 7919) % tokens).cuda()
            k_pool, v_pool = torch.empty_like(k), torch.empty_like(v)
            shape = {"N": tokens, "Hq": 32, "H": 8, "D": 128, "R": rotary_dim}
            nbytes = 2 * q.numel() * BF16 + 5 * k.numel() * BF16 + 2 * tokens * INDEX
            us = median_us(lambda: rope_pool_eager(q, k, v, pos, slots, k_pool, v_pool, rotary_dim))
            rows.append(row("ropePoolFused", "torch-eager", shape, us, nbytes, 0, "torch-copy", nbytes / us / 1e3 / copy_gbs, method))

    layers, heads, head_dim, rotary_dim, hidden = 5, 8, 128, 128, 4096
    cache = cos_sin_cache(CACHE_ROWS, rotary_dim)
    weight = torch.randn(layers, head_dim, dtype=torch.bfloat16, device="cuda")
    eps = torch.full((layers,), 1e-6, dtype=torch.float32, device="cuda")
    kv_weight_t = (torch.randn(layers * 2 * heads * head_dim, hidden, dtype=torch.bfloat16, device="cuda") / 32).t().contiguous()
    for tokens in TOKENS:
        ctx = torch.empty(tokens, hidden, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
        pos = positions(tokens)
        shape = {"L": layers, "H": heads, "D": head_dim, "R": rotary_dim, "T": tokens, "hidden": hidden}
        flops = 2 * tokens * hidden * layers * 2 * heads * head_dim
        gemm_us = median_us(lambda: torch.mm(ctx, kv_weight_t))
        rows.append(row("projection", "cublas", shape, gemm_us, 0, flops, "torch-mm", flops / gemm_us / 1e6 / mm_tflops, method))

        def eager():
            proj = torch.mm(ctx, kv_weight_t).view(tokens, layers, 2 * heads * head_dim)
            return norm_rope_eager(proj, weight, eps, cache, pos, heads, head_dim, rotary_dim)

        impls = [("torch-eager", eager)]
        if triton_fn is not None:
            impls.append(("sglang-triton", lambda: triton_fn(torch.mm(ctx, kv_weight_t).view(tokens, layers, -1), weight, eps, cache, pos, heads, head_dim, rotary_dim)))
        for impl, fn in impls:
            us = median_us(fn)
            rows.append(row("materialize", impl, shape, us, 0, flops, "projection alone (cublas)", gemm_us / us, method,
                            {"op": "projection", "impl": "cublas"}))

    rows.extend(paged_rows(decode_module, copy_gbs, method, notes))

    with open(args.out, "w") as f:
        json.dump({"ceilings": ceilings, "rows": rows, "notes": notes}, f, indent=1)
    for r in rows:
        label = json.dumps(r["shape"]) + (f" ({r['variant']})" if "variant" in r else "")
        print(f"{r['op']:22} {r['impl']:14} {label:70} {r['us']:10.2f} us  {100 * r['fraction']:6.1f}% of {r['ceiling']}")
    for n in notes:
        print(n)


if __name__ == "__main__":
    main()
