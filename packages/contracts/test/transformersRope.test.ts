/**
 * The frequencies and cos/sin of kvkit's RoPE against an implementation
 * nobody here wrote: Hugging Face transformers 5.17.0 (torch 2.11.0), its
 * `modeling_rope_utils.ROPE_INIT_FUNCTIONS[rope_type]` for Llama-3.1-8B
 * (`_compute_llama3_parameters`), Qwen2.5-7B-Instruct with YaRN factor 4
 * (`_compute_yarn_parameters`), a Llama with linear factor 2
 * (`_compute_linear_scaling_rope_parameters`), Qwen3-8B and Qwen2-VL-7B
 * (`_compute_default_rope_parameters`) and a Llama with dynamic NTK factor 2
 * (`_compute_dynamic_ntk_parameters` at three sequence lengths), run on the
 * GPU host. The literal numbers they printed are in fixtures/transformers-rope.json.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { mropeBounds, mropeStreamOfPair, ropeAngles, writeCosSinRow, writeMropeCosSinRow } from '../src/backend/index.js';
import type { RopeScaling } from '../src/backend/index.js';

interface HfScaling {
  readonly rope_type: string;
  readonly factor: number;
  readonly original_max_position_embeddings?: number;
  readonly low_freq_factor?: number;
  readonly high_freq_factor?: number;
}
interface HfConfig {
  readonly name: string;
  readonly ropeTheta: number;
  readonly headDim: number;
  readonly scaling: HfScaling | null;
  readonly invFreqF32Bits: readonly number[];
  readonly attentionScaling: number;
  readonly positions: readonly number[];
  readonly cosF32Bits: readonly (readonly number[])[];
  readonly sinF32Bits: readonly (readonly number[])[];
}
const fixture = JSON.parse(readFileSync(new URL('./fixtures/transformers-rope.json', import.meta.url), 'utf8')) as {
  configs: HfConfig[];
  dynamic: { ropeTheta: number; headDim: number; scaling: HfScaling; bySeqLen: { seqLen: number; invFreqF32Bits: number[] }[] };
};

/** kvkit's `ropeScaling` for a Hugging Face `rope_parameters` entry. */
function ropeScalingOf(s: HfScaling | null): RopeScaling | undefined {
  if (s === null) return undefined;
  const originalMaxPositions = s.original_max_position_embeddings!;
  switch (s.rope_type) {
    case 'linear':
      return { type: 'linear', factor: s.factor };
    case 'llama3':
      return { type: 'llama3', factor: s.factor, lowFreqFactor: s.low_freq_factor!, highFreqFactor: s.high_freq_factor!, originalMaxPositions };
    case 'yarn':
      return { type: 'yarn', factor: s.factor, originalMaxPositions };
    default:
      throw new Error(`no mapping for ${s.rope_type}`);
  }
}

const bitsOf = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0]!;
const f32Of = (bits: number) => new Float32Array(Uint32Array.of(bits).buffer)[0]!;
/** Pairs whose f32 frequency differs from transformers' bits. */
const differing = (ours: Float64Array, theirs: readonly number[]) => theirs.flatMap((b, j) => (bitsOf(ours[j]!) === b ? [] : [j]));

/**
 * torch's pow in f32 is not correctly rounded everywhere: these are the pairs
 * where its `base ** (2j/R)` lands one ulp from the correctly rounded value
 * kvkit computes (checked: the same pair differs for the plain frequencies).
 */
const TORCH_POW_OFF_BY_ONE: Readonly<Record<string, readonly number[]>> = {
  'Qwen2.5-7B-Instruct (yarn factor 4)': [37],
  'Qwen3-8B default': [37],
  'Qwen2-VL-7B default (mRoPE text part)': [37],
};

describe("transformers' RoPE frequencies", () => {
  it.each(fixture.configs.map((c) => [c.name, c] as const))("%s: angles 'float32' has its f32 inverse frequencies bit for bit", (name, c) => {
    const angles = ropeAngles({ ropeBase: c.ropeTheta, rotaryDim: c.headDim, ropeScaling: ropeScalingOf(c.scaling), angles: 'float32' });
    expect(differing(angles.frequencies, c.invFreqF32Bits)).toEqual(TORCH_POW_OFF_BY_ONE[name] ?? []);
    for (const j of TORCH_POW_OFF_BY_ONE[name] ?? []) expect(Math.abs(bitsOf(angles.frequencies[j]!) - c.invFreqF32Bits[j]!)).toBe(1);
    expect(angles.magnitude).toBe(Math.fround(c.attentionScaling));
  });

  it.each(fixture.configs.map((c) => [c.name, c] as const))('%s: the exact f64 frequencies round to within 3 f32 ulps of them, and the magnitude is its attention scaling', (_, c) => {
    const angles = ropeAngles({ ropeBase: c.ropeTheta, rotaryDim: c.headDim, ropeScaling: ropeScalingOf(c.scaling) });
    for (const [j, b] of c.invFreqF32Bits.entries()) expect(Math.abs(bitsOf(angles.frequencies[j]!) - b)).toBeLessThanOrEqual(3);
    expect(angles.magnitude).toBe(c.attentionScaling);
  });

  // For a grown base torch's pow lands up to 2 ulps from the correctly rounded one (3 pairs of 64 at 20000).
  it.each(fixture.dynamic.bySeqLen.map((b) => [b.seqLen, b] as const))('dynamic NTK at sequence length %i: sequenceLength gives its frequencies, within 2 ulps', (seqLen, b) => {
    const { ropeTheta, headDim, scaling } = fixture.dynamic;
    const ropeScaling = { type: 'dynamic', factor: scaling.factor, originalMaxPositions: scaling.original_max_position_embeddings!, sequenceLength: seqLen } as const;
    const angles = ropeAngles({ ropeBase: ropeTheta, rotaryDim: headDim, ropeScaling, angles: 'float32' });
    for (const [j, bits] of b.invFreqF32Bits.entries()) expect(Math.abs(bitsOf(angles.frequencies[j]!) - bits)).toBeLessThanOrEqual(2);
    // At the original context nothing grows: every pair bit for bit.
    if (seqLen === scaling.original_max_position_embeddings) expect(differing(angles.frequencies, b.invFreqF32Bits)).toEqual([]);
  });

  it.each(fixture.configs.map((c) => [c.name, c] as const))("%s: angles 'float32' gives its cos and sin at positions up to 200000 within an ulp (two with a magnitude)", (name, c) => {
    const angles = ropeAngles({ ropeBase: c.ropeTheta, rotaryDim: c.headDim, ropeScaling: ropeScalingOf(c.scaling), angles: 'float32' });
    const half = c.headDim / 2;
    const row = new Float32Array(c.headDim);
    const allowed = angles.magnitude === 1 ? 1 : 2;
    c.positions.forEach((p, i) => {
      writeCosSinRow(row, 0, p, angles);
      for (let j = 0; j < half; j++) {
        // A pair whose frequency torch rounds otherwise has another angle; the frequency test covers it.
        if ((TORCH_POW_OFF_BY_ONE[name] ?? []).includes(j)) continue;
        expect(Math.abs(bitsOf(row[j]!) - c.cosF32Bits[i]![j]!), `cos p=${p} j=${j}`).toBeLessThanOrEqual(allowed);
        expect(Math.abs(row[half + j]! - f32Of(c.sinF32Bits[i]![j]!)), `sin p=${p} j=${j}`).toBeLessThanOrEqual(allowed * 2 ** -24 * Math.max(Math.abs(row[half + j]!), 2 ** -126) * 2);
      }
    });
  });
});

describe("transformers' Qwen2-VL-7B rows under mRoPE", () => {
  const qwen2vl = fixture.configs.find((c) => c.name.startsWith('Qwen2-VL-7B'))!;
  // Its config's rope_scaling.mrope_section; each stream at one of the printed positions, all three apart.
  const section = [16, 24, 24];
  const streams = [qwen2vl.positions[2]!, qwen2vl.positions[0]!, qwen2vl.positions[1]!];

  it("gives pair j the cos and sin transformers printed at its stream's position, within an ulp", () => {
    const angles = ropeAngles({ ropeBase: qwen2vl.ropeTheta, rotaryDim: qwen2vl.headDim, angles: 'float32' });
    const half = qwen2vl.headDim / 2;
    const row = new Float32Array(qwen2vl.headDim);
    const bounds = mropeBounds(section);
    writeMropeCosSinRow(row, 0, streams, bounds, angles);
    for (let j = 0; j < half; j++) {
      if ((TORCH_POW_OFF_BY_ONE[qwen2vl.name] ?? []).includes(j)) continue;
      const at = qwen2vl.positions.indexOf(streams[mropeStreamOfPair(bounds, j)]!);
      expect(Math.abs(bitsOf(row[j]!) - qwen2vl.cosF32Bits[at]![j]!), `cos j=${j}`).toBeLessThanOrEqual(1);
      expect(Math.abs(row[half + j]! - f32Of(qwen2vl.sinF32Bits[at]![j]!)), `sin j=${j}`).toBeLessThanOrEqual(2 ** -23 * Math.max(Math.abs(row[half + j]!), 2 ** -126));
    }
  });
});
