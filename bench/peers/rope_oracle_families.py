"""RoPE numbers of three model families from Hugging Face transformers, for kvkit's literal tests.

Builds each family's rotary embedding with transformers' own code (installed beside PyTorch on the GPU host, never
vendored here) and prints what it computes as one JSON object, the very file the contracts tests read:

    python3 bench/peers/rope_oracle_families.py > packages/contracts/test/fixtures/transformers-rope-families.json

- Phi-3-mini-128k and Phi-4-mini (LongRoPE, `_compute_longrope_parameters`): inverse frequencies and attention
  scaling for the short factors (seq_len None) and the long ones (seq_len original + 1), and cos/sin rows of
  `Phi3RotaryEmbedding` for a batch within the original context and one past it;
- Qwen3-VL's text rotary embedding (`Qwen3VLTextRotaryEmbedding`, mrope_section [24, 20, 20], mrope_interleaved):
  its inverse frequencies and the cos/sin rows of tokens whose three streams differ;
- YaRN with DeepSeek's mscale / mscale_all_dim (`_compute_yarn_parameters`): inverse frequencies and attention factor.

The factor lists of the LongRoPE configs are made here (rising with the pair, as Phi-3's are) and printed with
the numbers, so the test reads the inputs and the outputs from the same file. Float32 values are printed as
their bits. A config the installed transformers cannot build goes to "errors" and leaves the others standing.
"""

import json
import struct
import sys

import torch
import transformers


def f32_bits(values):
    return [struct.unpack("<I", struct.pack("<f", float(v)))[0] for v in values]


def build(cls, base, rope):
    """A config in the form this transformers version takes: rope_parameters (5.x), else rope_theta + rope_scaling (4.x)."""
    params = dict(rope)
    try:
        cfg = cls(**base, rope_parameters=params)
        if getattr(cfg, "rope_parameters", None) and cfg.rope_parameters.get("rope_type", "default") == params.get("rope_type", "default"):
            return cfg, "rope_parameters"
    except TypeError:
        pass
    legacy = {k: v for k, v in rope.items() if k != "rope_theta"}
    legacy["type"] = legacy.get("rope_type", "default")
    return cls(**base, rope_theta=rope["rope_theta"], rope_scaling=legacy), "rope_scaling"


def rotary(module_cls, cfg):
    try:
        return module_cls(config=cfg)
    except TypeError:
        return module_cls(cfg)


def rows(rot, dim, positions):
    """cos/sin of the rotary embedding's forward for one batch of positions ([1, N], or [3, 1, N] for mRoPE)."""
    x = torch.zeros(1, 1, dim, dtype=torch.float32)
    pos = torch.tensor(positions, dtype=torch.int64)
    pos = pos[None, :] if pos.ndim == 1 else pos[:, None, :]
    with torch.no_grad():
        cos, sin = rot(x, pos)
    return [f32_bits(r) for r in cos[0].float().tolist()], [f32_bits(r) for r in sin[0].float().tolist()]


def phi_factors(n):
    """Short factors just above 1, long ones rising to about 48 (Phi-3's are shaped so), each an f32 value."""
    short = [struct.unpack("<f", struct.pack("<f", 1.0 + 0.06 * (j / (n - 1)) ** 2))[0] for j in range(n)]
    long = [struct.unpack("<f", struct.pack("<f", 1.0 + 47.0 * (j / (n - 1)) ** 3))[0] for j in range(n)]
    return short, long


LONGROPE = [
    # name, hidden, heads, kv heads, head_dim, partial rotary, max positions, original
    ("Phi-3-mini-128k (longrope)", 3072, 32, 32, 96, 1.0, 131072, 4096),
    ("Phi-4-mini (longrope, partial rotary 0.75)", 3072, 24, 8, 128, 0.75, 131072, 4096),
]
SHORT_POSITIONS = [0, 1, 7, 1000, 4095]
LONG_POSITIONS = [0, 1, 7, 4095, 4096, 65537, 131071]


def longrope_entry(name, hidden, heads, kv_heads, head_dim, partial, max_pos, original):
    from transformers.models.phi3 import modeling_phi3 as m
    rotary_dim = int(head_dim * partial)
    short, long = phi_factors(rotary_dim // 2)
    base = dict(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv_heads, num_hidden_layers=1,
                intermediate_size=4 * hidden, vocab_size=1024, pad_token_id=0, max_position_embeddings=max_pos,
                original_max_position_embeddings=original)
    if partial != 1.0:
        base["partial_rotary_factor"] = partial
    rope = {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": short, "long_factor": long}
    cfg, form = build(transformers.Phi3Config, base, rope)
    fn = transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS["longrope"]
    by = {}
    for which, seq_len in (("short", None), ("long", original + 1)):
        inv, scaling = fn(cfg, "cpu", seq_len=seq_len)
        by[which] = {"seqLen": seq_len, "invFreqF32Bits": f32_bits(inv.float().tolist()), "invFreq": inv.to(torch.float64).tolist(),
                     "attentionScaling": float(scaling)}
    batches = []
    for which, positions in (("short", SHORT_POSITIONS), ("long", LONG_POSITIONS)):
        rot = rotary(m.Phi3RotaryEmbedding, cfg)  # fresh: the long table, once chosen, is kept by the module
        cos, sin = rows(rot, rotary_dim, positions)
        batches.append({"which": which, "positions": positions, "cosF32Bits": cos, "sinF32Bits": sin})
    return {"name": name, "configForm": form, "function": "modeling_rope_utils._compute_longrope_parameters; modeling_phi3.Phi3RotaryEmbedding",
            "ropeTheta": 10000.0, "headDim": head_dim, "rotaryDim": rotary_dim, "maxPositionEmbeddings": max_pos,
            "originalMaxPositionEmbeddings": original, "shortFactor": short, "longFactor": long,
            "short": by["short"], "long": by["long"], "batches": batches}


def qwen3vl_entry():
    from transformers.models.qwen3_vl import configuration_qwen3_vl as c
    from transformers.models.qwen3_vl import modeling_qwen3_vl as m
    section, head_dim, theta = [24, 20, 20], 128, 5000000.0
    base = dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=head_dim, num_hidden_layers=1,
                intermediate_size=64, max_position_embeddings=262144, vocab_size=1024)
    rope = {"rope_type": "default", "rope_theta": theta, "mrope_section": section, "mrope_interleaved": True}
    cfg, form = build(c.Qwen3VLTextConfig, base, rope)
    rot = rotary(m.Qwen3VLTextRotaryEmbedding, cfg)
    # Temporal, height and width positions of six tokens: equal (text), a patch grid, and long-context values.
    positions = [[0, 5, 5, 5, 300, 131071], [0, 5, 6, 9, 17, 60000], [0, 5, 7, 2, 40, 200000]]
    cos, sin = rows(rot, head_dim, positions)
    return {"name": "Qwen3-VL-8B text rotary (interleaved mRoPE)", "configForm": form,
            "function": "modeling_qwen3_vl.Qwen3VLTextRotaryEmbedding (apply_interleaved_mrope)",
            "ropeTheta": theta, "headDim": head_dim, "mropeSection": section, "mropeInterleaved": True,
            "invFreqF32Bits": f32_bits(rot.inv_freq.float().tolist()), "attentionScaling": float(getattr(rot, "attention_scaling", 1.0)),
            "positions": positions, "cosF32Bits": cos, "sinF32Bits": sin}


YARN = [
    ("DeepSeek-V3 (yarn, mscale 1, mscale_all_dim 1)", {"mscale": 1.0, "mscale_all_dim": 1.0}),
    ("DeepSeek-V2-Lite (yarn, mscale 0.707, mscale_all_dim 0.707)", {"mscale": 0.707, "mscale_all_dim": 0.707}),
    ("yarn mscale 0.707, mscale_all_dim 1", {"mscale": 0.707, "mscale_all_dim": 1.0}),
    ("yarn mscale 1, mscale_all_dim 0 (falls back to factor alone)", {"mscale": 1.0, "mscale_all_dim": 0.0}),
]


def yarn_entry(name, extra):
    head_dim, theta = 64, 10000.0  # DeepSeek's qk_rope_head_dim and rope_theta
    base = dict(hidden_size=2048, num_attention_heads=16, num_key_value_heads=16, head_dim=head_dim, num_hidden_layers=1,
                intermediate_size=64, max_position_embeddings=163840, vocab_size=1024)
    rope = {"rope_type": "yarn", "rope_theta": theta, "factor": 40.0, "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0, **extra}
    cfg, form = build(transformers.LlamaConfig, base, rope)
    inv, scaling = transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS["yarn"](cfg, "cpu")
    return {"name": name, "configForm": form, "function": "modeling_rope_utils._compute_yarn_parameters", "ropeTheta": theta,
            "headDim": head_dim, "scaling": {k: v for k, v in rope.items() if k != "rope_theta"},
            "invFreqF32Bits": f32_bits(inv.float().tolist()), "attentionScaling": float(scaling)}


def main():
    report = {
        "source": f"Hugging Face transformers {transformers.__version__} with torch {torch.__version__}, run by bench/peers/rope_oracle_families.py on the GPU host",
        "transformers": transformers.__version__, "torch": torch.__version__,
        "longrope": [], "mropeInterleaved": None, "yarnMscale": [], "errors": [],
    }
    for entry in LONGROPE:
        try:
            report["longrope"].append(longrope_entry(*entry))
        except Exception as e:  # one config failing must not hide the others
            report["errors"].append(f"{entry[0]}: {type(e).__name__}: {e}")
    try:
        report["mropeInterleaved"] = qwen3vl_entry()
    except Exception as e:
        report["errors"].append(f"Qwen3-VL: {type(e).__name__}: {e}")
    for name, extra in YARN:
        try:
            report["yarnMscale"].append(yarn_entry(name, extra))
        except Exception as e:
            report["errors"].append(f"{name}: {type(e).__name__}: {e}")
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
