"""The peers of kvkit's GPU ops, timed on the same GPU in the same device session.

PyTorch eager versions of each op (our own code, written from SEMANTICS.md),
cuBLAS through torch.mm for the projection, a PyTorch copy as the bandwidth
ceiling, and, when a copy of SGLang's fused_kv_materialize.py is given with
--sglang (fetched beside the repository, never committed), its Triton kernel.

    python3 bench/peers/torch_peers.py --out peers.json [--sglang path/to/fused_kv_materialize.py]

Writes {"ceilings": [...], "rows": [...], "notes": [...]} in the schema of
bench/src/results.ts, which `pnpm bench --peers peers.json` merges.
"""

import argparse
import importlib.util
import json

import torch
import triton.testing

BF16 = 2
F32 = 4
INDEX = 4
CACHE_ROWS = 65536
TOKENS = (16, 256, 4096, 32768)
MODELS = ((5, 8, 128, 128), (5, 8, 128, 64), (1, 8, 128, 128), (1, 8, 128, 64), (5, 4, 64, 32))


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


def row(op, impl, shape, us, nbytes, flops, ceiling, fraction, method, reference=None):
    gbs = nbytes / us / 1e3 if nbytes else None
    tflops = flops / us / 1e6 if flops else None
    r = {"op": op, "impl": impl, "dtype": "bf16", "shape": shape, "us": us, "bytes": nbytes, "flops": flops,
         "gbs": gbs, "tflops": tflops, "ceiling": ceiling, "fraction": fraction, "method": method}
    if reference:
        r["reference"] = reference  # the row of this run and shape the fraction divides by
    return r


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--sglang", help="path to SGLang's fused_kv_materialize.py, run from outside the repository")
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

    with open(args.out, "w") as f:
        json.dump({"ceilings": ceilings, "rows": rows, "notes": notes}, f, indent=1)
    for r in rows:
        print(f"{r['op']:22} {r['impl']:14} {json.dumps(r['shape']):70} {r['us']:10.2f} us  {100 * r['fraction']:6.1f}% of {r['ceiling']}")


if __name__ == "__main__":
    main()
