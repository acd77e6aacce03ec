/**
 * mlaPoolFused against an implementation nobody here wrote: Hugging Face transformers' DeepSeek-V3
 * (modeling_deepseek_v3: DeepseekV3RMSNorm as kv_a_layernorm, DeepseekV3RotaryEmbedding with the model's
 * YaRN config, apply_rotary_pos_emb_interleave), run on the GPU host by fixtures/transformers-deepseek-mla.py;
 * the literal numbers it printed are in fixtures/transformers-deepseek-mla.json. transformers returns the
 * rotated RoPE part de-interleaved (element j is pair j's first value, R/2 + j its second); kvkit's pool row
 * keeps DeepSeek's interleaved order (pair j at C + 2j, C + 2j + 1), as vLLM's and SGLang's MLA caches do, so
 * the comparison maps one order onto the other. Skipped until the fixture is there.
 */
import { existsSync, readFileSync } from 'node:fs';
import { ropeAngles } from '@kvkit/contracts/backend';
import { describe, expect, it } from 'vitest';
import { createCpuBackend } from '../src/index.js';

interface Fixture {
  readonly config: { kv_lora_rank: number; qk_rope_head_dim: number; qk_nope_head_dim: number; num_attention_heads: number; rope_theta: number; rms_norm_eps: number; rope_scaling: Record<string, number | string> };
  readonly positions: readonly number[];
  readonly attentionScaling: number;
  readonly invFreqF32Bits: readonly number[];
  readonly softmaxScale: number;
  readonly kvLatentF32Bits: readonly number[];
  readonly kvNormWeightF32Bits: readonly number[];
  readonly qF32Bits: readonly number[];
  readonly normedF32Bits: readonly number[];
  readonly normedBf16Bits: readonly number[];
  readonly kEmbedF32Bits: readonly number[];
  readonly qEmbedF32Bits: readonly number[];
}

const path = new URL('./fixtures/transformers-deepseek-mla.json', import.meta.url);
const present = existsSync(path);
if (!present) console.warn('transformers DeepSeek-V3 literals absent: run test/fixtures/transformers-deepseek-mla.py where transformers 5.x is installed, its stdout into test/fixtures/transformers-deepseek-mla.json');
const fixture = (present ? JSON.parse(readFileSync(path, 'utf8')) : undefined) as Fixture | undefined;

const f32 = (bits: readonly number[]) => new Float32Array(Uint32Array.from(bits).buffer);
const bf16 = (bits: readonly number[]) => new Float32Array(Uint32Array.from(bits, (b) => b << 16).buffer);
const bitsOf = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0]!;
/** Distance in f32 ulps (same sign), or in bf16 ulps of values that are bf16. */
const ulps = (a: number, b: number, shift = 0) => Math.abs((bitsOf(a) >> shift) - (bitsOf(b) >> shift));

const describeFixture = fixture ? describe : (name: string, _: () => void) => describe.skip(`${name} (skipped: no fixtures/transformers-deepseek-mla.json yet)`, () => it('needs the literals', () => {}));

describeFixture("transformers' DeepSeek-V3 MLA cache write", () => {
  const fx = fixture!;
  const { kv_lora_rank: C, qk_rope_head_dim: R, qk_nope_head_dim: nope, num_attention_heads: H } = fx.config;
  const N = fx.positions.length;
  const W = C + R;
  const s = fx.config.rope_scaling;
  const ropeScaling = { type: 'yarn', factor: Number(s.factor), originalMaxPositions: Number(s.original_max_position_embeddings), betaFast: Number(s.beta_fast), betaSlow: Number(s.beta_slow), mscale: Number(s.mscale), mscaleAllDim: Number(s.mscale_all_dim) } as const;

  const run = (dtype: 'f32' | 'bf16') => {
    const backend = createCpuBackend();
    const pool = backend.empty(dtype, [N, 1, W]);
    const { qRot } = backend.mlaPoolFused({
      kvLatent: backend.tensor(dtype, [N, W], f32(fx.kvLatentF32Bits)),
      kvNormWeight: backend.tensor(dtype, [C], f32(fx.kvNormWeightF32Bits)),
      eps: fx.config.rms_norm_eps,
      q: backend.tensor(dtype, [N, H, nope + R], f32(fx.qF32Bits)),
      positions: backend.tensor('i32', [N], fx.positions),
      slots: backend.tensor('i32', [N], Array.from({ length: N }, (_, n) => n)),
      pool,
      kvLoraRank: C,
      qkRopeHeadDim: R,
      numQoHeads: H,
      ropeBase: fx.config.rope_theta,
      ropeScaling,
      angles: 'float32',
    });
    return { backend, pool, qRot: qRot! };
  };

  // Pairs whose f32 frequency torch rounds otherwise (its pow is not correctly rounded everywhere): their angles differ, so their values are not compared.
  const angles = ropeAngles({ ropeBase: fx.config.rope_theta, rotaryDim: R, ropeScaling, angles: 'float32' });
  const offPairs = new Set(fx.invFreqF32Bits.flatMap((b, j) => (bitsOf(angles.frequencies[j]!) === b ? [] : [j])));
  /** f32 rotation of a pair in transformers against f64 in kvkit: a few ulps of the inputs' size. */
  const near = (got: number, want: number, scale: number) => Math.abs(got - want) <= 2 ** -20 * Math.max(scale, 2 ** -10);

  it("angles 'float32' has transformers' YaRN frequencies (all but a few pairs bit for bit, those within 2 ulps) and magnitude", () => {
    expect(offPairs.size).toBeLessThanOrEqual(2);
    for (const j of offPairs) expect(Math.abs(bitsOf(angles.frequencies[j]!) - fx.invFreqF32Bits[j]!), `pair ${j}`).toBeLessThanOrEqual(2);
    expect(angles.magnitude).toBe(Math.fround(fx.attentionScaling));
  });

  it('in f32: the latent part is kv_a_layernorm within 2 ulps, the RoPE part (interleaved) its rotated k_pe within 4', async () => {
    const { backend, pool } = run('f32');
    const rows = await backend.read(pool);
    const normed = f32(fx.normedF32Bits);
    const kEmbed = f32(fx.kEmbedF32Bits);
    const latent = f32(fx.kvLatentF32Bits);
    for (let n = 0; n < N; n++) {
      for (let i = 0; i < C; i++) expect(ulps(rows[n * W + i]!, normed[n * C + i]!), `latent n=${n} i=${i}`).toBeLessThanOrEqual(2);
      for (let j = 0; j < R / 2; j++) {
        if (offPairs.has(j)) continue;
        // transformers' element j and R/2 + j are pair j's two values: kvkit's C + 2j and C + 2j + 1.
        const scale = Math.abs(latent[n * W + C + 2 * j]!) + Math.abs(latent[n * W + C + 2 * j + 1]!);
        expect(near(rows[n * W + C + 2 * j]!, kEmbed[n * R + j]!, scale), `k_pe n=${n} pair ${j} (first): ${rows[n * W + C + 2 * j]} vs ${kEmbed[n * R + j]}`).toBe(true);
        expect(near(rows[n * W + C + 2 * j + 1]!, kEmbed[n * R + R / 2 + j]!, scale), `k_pe n=${n} pair ${j} (second)`).toBe(true);
      }
    }
    backend.dispose();
  });

  it('in f32: qRot copies q_nope and holds the rotated q_pe, interleaved', async () => {
    const { backend, qRot } = run('f32');
    const got = await backend.read(qRot);
    const q = f32(fx.qF32Bits);
    const qEmbed = f32(fx.qEmbedF32Bits);
    const D = nope + R;
    for (let n = 0; n < N; n++) {
      for (let h = 0; h < H; h++) {
        const at = (n * H + h) * D;
        for (let i = 0; i < nope; i++) expect(got[at + i]).toBe(q[at + i]);
        const e = (n * H + h) * R;
        for (let j = 0; j < R / 2; j++) {
          if (offPairs.has(j)) continue;
          const scale = Math.abs(q[at + nope + 2 * j]!) + Math.abs(q[at + nope + 2 * j + 1]!);
          expect(near(got[at + nope + 2 * j]!, qEmbed[e + j]!, scale), `q_pe n=${n} h=${h} pair ${j} (first)`).toBe(true);
          expect(near(got[at + nope + 2 * j + 1]!, qEmbed[e + R / 2 + j]!, scale), `q_pe n=${n} h=${h} pair ${j} (second)`).toBe(true);
        }
      }
    }
    backend.dispose();
  });

  it('in bf16: the latent part is within a bf16 ulp of kv_a_layernorm (transformers rounds x · inv before the weight, kvkit once)', async () => {
    const { backend, pool } = run('bf16');
    const rows = await backend.read(pool);
    const normed = bf16(fx.normedBf16Bits);
    for (let n = 0; n < N; n++) for (let i = 0; i < C; i++) expect(ulps(rows[n * W + i]!, normed[n * C + i]!, 16), `latent n=${n} i=${i}`).toBeLessThanOrEqual(1);
    backend.dispose();
  });

  it("DeepSeek-V3's softmax scale is qk_head_dim^-0.5 times mscale(factor, mscale_all_dim)^2: what pagedAttention's scale takes", () => {
    const mscale = 0.1 * ropeScaling.mscaleAllDim * Math.log(ropeScaling.factor) + 1;
    expect(fx.softmaxScale).toBeCloseTo((nope + R) ** -0.5 * mscale * mscale, 6);
  });
});
