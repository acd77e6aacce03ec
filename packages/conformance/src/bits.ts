/**
 * Tensors at the level of their bits (`tensorFromBits`, `readBits`): every
 * stored pattern comes back unchanged, and an op cannot tell a tensor made
 * from bits from the same tensor made by `tensor()` from the decoded values.
 */
import type { Backend, BitsOf, DType, FloatDType, IndexDType, Tensor } from '@kvkit/contracts';
import { decodeHalves, encodeHalves } from '@kvkit/contracts/backend';
import { buildCosSinCache, distinctPositions, epsPerLayer, randomPositive, randomValues, Rng, seedOf, slotPermutation } from './data.js';
import { Checks } from './tolerances.js';
import { Scope, untyped } from './tensors.js';

type Bits = BitsOf<DType>;

/** Where two bit arrays first differ, for the message; equal arrays pass. */
function sameBits(checks: Checks, what: string, actual: Bits, expected: Bits): void {
  if (actual.constructor !== expected.constructor) {
    checks.that(false, `${what}: readBits returned a ${actual.constructor.name}, expected a ${expected.constructor.name}`);
    return;
  }
  if (actual.length !== expected.length) {
    checks.that(false, `${what}: ${actual.length} elements, expected ${expected.length}`);
    return;
  }
  for (let i = 0; i < actual.length; i++) {
    if (actual[i] !== expected[i]) {
      checks.that(false, `${what}: element ${i} is 0x${actual[i]!.toString(16)}, expected 0x${expected[i]!.toString(16)}`);
      return;
    }
  }
}

/** The stored bits of `values` in `dtype`, rounded once as `tensor()` rounds them. */
function bitsOfValues(dtype: FloatDType, values: Float32Array): Uint16Array | Uint32Array {
  if (dtype === 'f32') return new Uint32Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength));
  const out = new Uint16Array(values.length);
  encodeHalves(dtype, values, out);
  return out;
}

/** The values `bits` stand for, exactly (every f16 and bf16 value is an f32). */
function valuesOfBits(dtype: FloatDType, bits: Uint16Array | Uint32Array): Float32Array {
  if (dtype === 'f32') return new Float32Array(bits.buffer.slice(bits.byteOffset, bits.byteOffset + bits.byteLength));
  return decodeHalves(dtype, bits as Uint16Array);
}

/** f32 patterns a conversion would disturb: NaN payloads (quiet and signalling, both signs), ±0, subnormals, ±Infinity, extremes. */
const F32_PROBES = [0x7fc00000, 0x7fa00001, 0x7f800001, 0xffc12345, 0xff800001, 0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x00400000, 0x7f800000, 0xff800000, 0x7f7fffff, 0x00800000, 0x3f800000];

/**
 * Every f16 or bf16 code (NaN payloads, ±0, subnormals, ±Infinity among them)
 * goes in through tensorFromBits and comes back bit for bit from readBits,
 * also from a subarray at an odd element offset; read() decodes each exactly.
 * f32 bits (NaN payloads included) given as a Uint32Array or a Float32Array,
 * and i32 and i64 values, come back unchanged too.
 */
export async function checkBitsRoundTrip(backend: Backend, dtype: FloatDType): Promise<void> {
  const s = new Scope(backend);
  const checks = new Checks(`tensorFromBits() and readBits() round trip [${dtype}]`);
  try {
    const rng = new Rng(seedOf(`bits round trip ${dtype}`));
    let bits: Uint16Array | Uint32Array;
    if (dtype === 'f32') {
      const random = Array.from({ length: 1001 }, () => (rng.int(2 ** 16) * 2 ** 16 + rng.int(2 ** 16)) >>> 0);
      bits = Uint32Array.from([...F32_PROBES, ...random]);
    } else {
      bits = Uint16Array.from({ length: 65536 }, (_, h) => h);
    }
    const t = s.track(backend.tensorFromBits(dtype, [bits.length], bits));
    checks.that(t.dtype === dtype && t.shape.length === 1 && t.shape[0] === bits.length && t.backend === backend.kind, `tensorFromBits made a ${t.dtype} [${t.shape.join(', ')}] ${t.backend} tensor`);
    sameBits(checks, 'every code, read back', await backend.readBits(t), bits);
    const decoded = await backend.read(t);
    sameBits(checks, 'read() of it, as f32 bits', new Uint32Array(decoded.buffer, decoded.byteOffset, decoded.length), new Uint32Array(valuesOfBits(dtype, bits).buffer));
    // An odd count at an odd offset: the bytes of the view, not of its buffer.
    const part = bits.subarray(3, 3 + 2 * Math.floor(bits.length / 4) + 1);
    sameBits(checks, 'a subarray at offset 3', await backend.readBits(s.track(backend.tensorFromBits(dtype, [part.length], part))), part.slice());
    if (dtype === 'f32') {
      const asFloats = new Float32Array(bits.buffer, 0, bits.length);
      sameBits(checks, 'f32 bits given as a Float32Array', await backend.readBits(s.track(backend.tensorFromBits('f32', [bits.length], asFloats))), bits);
    }
    for (const index of ['i32', 'i64'] as const) await checkIndexBits(s, checks, rng, index);
    checks.that((await backend.readBits(s.track(backend.tensorFromBits(dtype, [0, 3], new (dtype === 'f32' ? Uint32Array : Uint16Array)(0))))).length === 0, 'an empty tensor from bits reads back empty');
    checks.done();
  } finally {
    s.dispose();
  }
}

async function checkIndexBits(s: Scope, checks: Checks, rng: Rng, dtype: IndexDType): Promise<void> {
  const n = 37;
  const given =
    dtype === 'i32'
      ? Int32Array.from({ length: n }, (_, i) => (i === 0 ? -(2 ** 31) : i === 1 ? 2 ** 31 - 1 : rng.int(2 ** 16) * 2 ** 15 - 2 ** 30))
      : BigInt64Array.from({ length: n }, (_, i) => (i === 0 ? -(2n ** 63n) : i === 1 ? 2n ** 63n - 1n : (BigInt(rng.int(2 ** 30)) << 33n) - BigInt(rng.int(2 ** 30))));
  const t = s.track(s.backend.tensorFromBits(dtype, [n], given));
  sameBits(checks, `${dtype} from bits, read back`, await s.backend.readBits(t), given);
  sameBits(checks, `${dtype} from bits, read()`, await s.backend.read(t), given);
}

/** The same tensor twice: by `tensor()` from the values the bits decode to, and by `tensorFromBits()`. */
function twins(s: Scope, dtype: FloatDType, shape: readonly number[], values: Float32Array): [Tensor, Tensor] {
  const bits = bitsOfValues(dtype, values);
  return [s.track(s.backend.tensor(dtype, shape, valuesOfBits(dtype, bits))), s.track(s.backend.tensorFromBits(dtype, shape, bits as never))];
}

function indexTwins(s: Scope, dtype: IndexDType, shape: readonly number[], values: readonly number[]): [Tensor, Tensor] {
  const bits = dtype === 'i32' ? Int32Array.from(values) : BigInt64Array.from(values, (v) => BigInt(v));
  return [s.track(s.backend.tensor(dtype, shape, values)), s.track(s.backend.tensorFromBits(dtype, shape, bits))];
}

/**
 * fusedNormRopeStacked and ropePoolFused on inputs made from bits give
 * bit-identical outputs (and pools) to the same calls on inputs made by
 * `tensor()` from the decoded values; odd sizes, random data.
 */
export async function checkOpsOnBits(backend: Backend, dtype: FloatDType): Promise<void> {
  const s = new Scope(backend);
  const checks = new Checks(`ops on tensors from bits = ops on tensors from values [${dtype}]`);
  const ops = untyped(backend);
  const rng = new Rng(seedOf(`ops on bits ${dtype}`));
  try {
    const [T, L, H, D, R, P] = [5, 3, 3, 6, 4, 11];
    const kv = twins(s, dtype, [T, L, 2 * H * D], randomValues(rng, T * L * 2 * H * D));
    const kNormWeight = twins(s, dtype, [L, D], randomPositive(rng, L * D));
    const eps = twins(s, 'f32', [L], epsPerLayer(L));
    const cosSinCache = twins(s, 'f32', [P, R], Float32Array.from(buildCosSinCache(P, R, 10000)));
    const positions = indexTwins(s, 'i64', [T], distinctPositions(rng, T, P));
    const fused = [0, 1].map((i) =>
      ops.fusedNormRopeStacked({ kv: kv[i], kNormWeight: kNormWeight[i], eps: eps[i], cosSinCache: cosSinCache[i], positions: positions[i], numKvHeads: H, headDim: D, rotaryDim: R }),
    );
    for (const out of fused) {
      s.track(out.kOut);
      s.track(out.vOut);
    }
    sameBits(checks, 'fusedNormRopeStacked kOut', await backend.readBits(fused[1]!.kOut), await backend.readBits(fused[0]!.kOut));
    sameBits(checks, 'fusedNormRopeStacked vOut', await backend.readBits(fused[1]!.vOut), await backend.readBits(fused[0]!.vOut));

    const [N, Hq, S] = [7, 6, 9];
    const q = twins(s, dtype, [N, Hq, D], randomValues(rng, N * Hq * D));
    const k = twins(s, dtype, [N, H, D], randomValues(rng, N * H * D));
    const v = twins(s, dtype, [N, H, D], randomValues(rng, N * H * D));
    const kPool = twins(s, dtype, [S, H, D], randomValues(rng, S * H * D));
    const vPool = twins(s, dtype, [S, H, D], randomValues(rng, S * H * D));
    const ropePositions = indexTwins(s, 'i32', [N], distinctPositions(rng, N, 64));
    const slots = indexTwins(s, 'i32', [N], slotPermutation(rng, N, S, 2));
    const rope = [0, 1].map((i) =>
      ops.ropePoolFused({ q: q[i], k: k[i], v: v[i], positions: ropePositions[i], slots: slots[i], kPool: kPool[i], vPool: vPool[i], numKvHeads: H, numQoHeads: Hq, headDim: D, rotaryDim: R, ropeBase: 10000 }),
    );
    for (const out of rope) {
      s.track(out.qRot);
      s.track(out.kRot);
    }
    sameBits(checks, 'ropePoolFused qRot', await backend.readBits(rope[1]!.qRot), await backend.readBits(rope[0]!.qRot));
    sameBits(checks, 'ropePoolFused kRot', await backend.readBits(rope[1]!.kRot), await backend.readBits(rope[0]!.kRot));
    sameBits(checks, 'ropePoolFused kPool', await backend.readBits(kPool[1]), await backend.readBits(kPool[0]));
    sameBits(checks, 'ropePoolFused vPool', await backend.readBits(vPool[1]), await backend.readBits(vPool[0]));
    // readBits and read agree on what they see.
    const kRotValues = await backend.read(rope[1]!.kRot);
    sameBits(checks, 'readBits(kRot) decoded = read(kRot)', bitsOfValues(dtype, kRotValues as Float32Array), await backend.readBits(rope[1]!.kRot));
    checks.done();
  } finally {
    s.dispose();
  }
}
