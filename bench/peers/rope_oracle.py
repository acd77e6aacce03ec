"""RoPE numbers from Hugging Face transformers, the outside oracle of kvkit's RoPE variants.

Builds the rotary embedding modules of a few real configs with transformers' own code (installed beside
PyTorch on the benchmark machine, never vendored here) and prints what they compute, for kvkit's tests to
keep as literal numbers:

    python3 bench/peers/rope_oracle.py > rope-oracle.json

- inverse frequencies and attention factor (the cos/sin magnitude) per config, in float64 and as float32 bits;
- cos/sin of the float32 convention at a few long-context positions (transformers builds them in float32);
- mRoPE (Qwen2-VL) and Q/K-norm + RoPE (Qwen3) applied to small seeded q/k, float32.
"""

import json
import math
import struct
import sys

import torch
import transformers


def f32_bits(values):
    return [struct.unpack("<I", struct.pack("<f", float(v)))[0] for v in values]


def make_config(cls, theta, head_dim, hidden, heads, kv_heads, scaling, max_pos):
    """A config in the form this transformers version takes: rope_parameters (5.x) or rope_theta + rope_scaling (4.x)."""
    base = dict(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
                max_position_embeddings=max_pos, num_hidden_layers=1, intermediate_size=4 * hidden)
    params = {"rope_theta": theta, "rope_type": scaling.get("rope_type", "default") if scaling else "default"}
    if scaling:
        params.update({k: v for k, v in scaling.items() if k != "rope_type"})
    try:
        cfg = cls(**base, rope_parameters=params)
        if getattr(cfg, "rope_parameters", None) and cfg.rope_parameters.get("rope_type") == params["rope_type"]:
            return cfg, "rope_parameters"
    except TypeError:
        pass
    legacy = dict(scaling) if scaling else None
    if legacy is not None:
        legacy["type"] = legacy["rope_type"]
    return cls(**base, rope_theta=theta, rope_scaling=legacy), "rope_scaling"


def rotary_of(module_cls, cfg):
    try:
        return module_cls(config=cfg)
    except TypeError:
        return module_cls(cfg)


CONFIGS = [
    # name, config class path, rotary class path, theta, head_dim, hidden, heads, kv_heads, scaling, max_pos
    ("Llama-3.1-8B (llama3)", "LlamaConfig", "models.llama.modeling_llama.LlamaRotaryEmbedding", 500000.0, 128, 4096, 32, 8,
     {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192}, 131072),
    ("Qwen2.5-7B-Instruct (yarn factor 4)", "Qwen2Config", "models.qwen2.modeling_qwen2.Qwen2RotaryEmbedding", 1000000.0, 128, 3584, 28, 4,
     {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, 131072),
    ("Llama linear factor 2", "LlamaConfig", "models.llama.modeling_llama.LlamaRotaryEmbedding", 10000.0, 128, 4096, 32, 8,
     {"rope_type": "linear", "factor": 2.0}, 4096),
    ("Qwen3-8B default", "Qwen3Config", "models.qwen3.modeling_qwen3.Qwen3RotaryEmbedding", 1000000.0, 128, 4096, 32, 8, None, 40960),
    ("Qwen2-VL-7B default (mRoPE text part)", "Qwen2Config", "models.qwen2.modeling_qwen2.Qwen2RotaryEmbedding", 1000000.0, 128, 3584, 28, 4, None, 32768),
]
LONG_POSITIONS = [0, 1, 7, 4095, 8191, 32767, 65537, 131071, 200000]


def resolve(path):
    obj = transformers
    for part in path.split("."):
        obj = getattr(obj, part) if hasattr(obj, part) else __import__(f"{obj.__name__}.{part}", fromlist=["_"])
    return obj


def frequencies_entry(name, cfg_cls, rot_cls, theta, head_dim, hidden, heads, kv_heads, scaling, max_pos):
    cfg, form = make_config(getattr(transformers, cfg_cls), theta, head_dim, hidden, heads, kv_heads, scaling, max_pos)
    rot = rotary_of(resolve(rot_cls), cfg)
    inv = rot.inv_freq.detach().to(torch.float64).cpu()
    x = torch.zeros(1, 1, head_dim, dtype=torch.float32)
    pos = torch.tensor([LONG_POSITIONS], dtype=torch.int64)
    cos, sin = rot(x, pos)
    return {
        "name": name, "configForm": form, "ropeTheta": theta, "headDim": head_dim, "scaling": scaling,
        "invFreqF32Bits": f32_bits(rot.inv_freq.detach().float().cpu().tolist()),
        "invFreq": inv.tolist(),
        "attentionScaling": float(getattr(rot, "attention_scaling", 1.0)),
        "positions": LONG_POSITIONS,
        "cosF32Bits": [f32_bits(row) for row in cos[0].float().tolist()],
        "sinF32Bits": [f32_bits(row) for row in sin[0].float().tolist()],
    }


def dynamic_entry():
    """Dynamic NTK: the frequencies transformers' init function gives for a sequence past the original length."""
    fns = transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS
    cfg, form = make_config(transformers.LlamaConfig, 10000.0, 128, 4096, 32, 8, {"rope_type": "dynamic", "factor": 2.0}, 4096)
    out = []
    for seq_len in (4096, 8192, 20000):
        inv, factor = fns["dynamic"](cfg, "cpu", seq_len=seq_len)
        out.append({"seqLen": seq_len, "invFreq": inv.to(torch.float64).tolist(), "invFreqF32Bits": f32_bits(inv.float().tolist()),
                    "attentionScaling": float(factor)})
    return {"name": "Llama dynamic factor 2, original 4096", "configForm": form, "ropeTheta": 10000.0, "headDim": 128,
            "scaling": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4096}, "bySeqLen": out}


def seeded(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float32)


def mrope_entry():
    """Qwen2-VL: three position streams, mrope_section [16, 24, 24], applied to seeded q/k by the model's own modules."""
    from transformers.models.qwen2_vl import modeling_qwen2_vl as m
    section = [16, 24, 24]
    tokens, heads, head_dim, theta = 5, 2, 128, 1000000.0
    positions = [[0, 1, 2, 3, 4], [0, 0, 1, 1, 7], [0, 3, 0, 5, 9]]
    q, k = seeded((1, heads, tokens, head_dim), 1), seeded((1, heads, tokens, head_dim), 2)
    pos = torch.tensor(positions, dtype=torch.int64)[:, None, :]  # [3, batch 1, N]
    if hasattr(m, "apply_multimodal_rotary_pos_emb"):  # 4.x: the section is applied to cos/sin by this function
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        freqs = pos[:, :, :, None].float() * inv
        emb = torch.cat((freqs, freqs), dim=-1)
        q_rot, k_rot = m.apply_multimodal_rotary_pos_emb(q, k, emb.cos(), emb.sin(), section)
        function = "modeling_qwen2_vl.apply_multimodal_rotary_pos_emb"
    else:  # 5.x: Qwen2VLRotaryEmbedding recomposes the three streams into one cos/sin per token
        from transformers.models.qwen2_vl import configuration_qwen2_vl as c
        cfg = c.Qwen2VLTextConfig(hidden_size=heads * head_dim, num_attention_heads=heads, num_key_value_heads=heads,
                                  head_dim=head_dim, num_hidden_layers=1, intermediate_size=64, max_position_embeddings=32768,
                                  rope_parameters={"rope_type": "default", "rope_theta": theta, "mrope_section": section})
        rot = rotary_of(m.Qwen2VLRotaryEmbedding, cfg)
        cos, sin = rot(q, pos)
        q_rot, k_rot = m.apply_rotary_pos_emb(q, k, cos, sin)
        function = "modeling_qwen2_vl.Qwen2VLRotaryEmbedding + apply_rotary_pos_emb"
    return {"name": "Qwen2-VL-7B mRoPE", "function": function,
            "mropeSection": section, "ropeTheta": theta, "headDim": head_dim, "positions": positions, "layout": "[1, heads, tokens, headDim]",
            "seeds": {"q": 1, "k": 2}, "qF32Bits": f32_bits(q.flatten().tolist()), "kF32Bits": f32_bits(k.flatten().tolist()),
            "qRotF32Bits": f32_bits(q_rot.flatten().tolist()), "kRotF32Bits": f32_bits(k_rot.flatten().tolist())}


def qk_norm_entry():
    """Qwen3: RMSNorm of each q and k head (q_norm, k_norm), then RoPE, float32."""
    from transformers.models.qwen3 import modeling_qwen3 as m
    tokens, heads, head_dim, theta, eps = 3, 2, 128, 1000000.0, 1e-6
    q, k = seeded((1, heads, tokens, head_dim), 3), seeded((1, heads, tokens, head_dim), 4)
    qn, kn = m.Qwen3RMSNorm(head_dim, eps=eps), m.Qwen3RMSNorm(head_dim, eps=eps)
    with torch.no_grad():
        qn.weight.copy_(seeded((head_dim,), 5)); kn.weight.copy_(seeded((head_dim,), 6))
        positions = [5, 1000, 199999]
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        freqs = torch.tensor(positions, dtype=torch.float32)[:, None] * inv[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None], emb.sin()[None]
        q_rot, k_rot = m.apply_rotary_pos_emb(qn(q), kn(k), cos, sin)
    return {"name": "Qwen3 q_norm/k_norm then RoPE", "function": "transformers.models.qwen3.modeling_qwen3 (Qwen3RMSNorm, apply_rotary_pos_emb)",
            "eps": eps, "ropeTheta": theta, "headDim": head_dim, "positions": positions, "layout": "[1, heads, tokens, headDim]",
            "seeds": {"q": 3, "k": 4, "qNormWeight": 5, "kNormWeight": 6},
            "qF32Bits": f32_bits(q.flatten().tolist()), "kF32Bits": f32_bits(k.flatten().tolist()),
            "qNormWeightF32Bits": f32_bits(qn.weight.flatten().tolist()), "kNormWeightF32Bits": f32_bits(kn.weight.flatten().tolist()),
            "qRotF32Bits": f32_bits(q_rot.flatten().tolist()), "kRotF32Bits": f32_bits(k_rot.flatten().tolist())}


def main():
    report = {"transformers": transformers.__version__, "torch": torch.__version__, "frequencies": [], "errors": []}
    for entry in CONFIGS:
        try:
            report["frequencies"].append(frequencies_entry(*entry))
        except Exception as e:  # one config failing must not hide the others
            report["errors"].append(f"{entry[0]}: {type(e).__name__}: {e}")
    for key, fn in (("dynamic", dynamic_entry), ("mrope", mrope_entry), ("qkNorm", qk_norm_entry)):
        try:
            report[key] = fn()
        except Exception as e:
            report["errors"].append(f"{key}: {type(e).__name__}: {e}")
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
