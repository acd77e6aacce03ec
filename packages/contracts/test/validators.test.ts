import { describe, expect, it } from 'vitest';
import { defineBackend, LAYER_VIEW, layoutOf, TENSOR_LAYOUT, TENSOR_OWNER } from '../src/backend/index.js';
import { allCalls } from '../src/dsl/index.js';
import type { BackendKernels, OwnedTensor } from '../src/backend/index.js';
import { ContractError, ropeCosSinCache } from '../src/index.js';
import { validatePagedAttention } from '../src/generated/validators.js';
import type { DType, Shape } from '../src/index.js';

/**
 * The validator layer alone, in front of kernels that only record what
 * reaches them: a rejected call must reach nothing, an accepted one must
 * arrive with its dims bound and its defaults applied.
 */
function recordingBackend(opts: { label?: string; valuesOnHost?: boolean; tensorLimit?: BackendKernels['tensorLimit'] } = {}) {
  const calls: { op: string; args: any }[] = [];
  const made: Shape[] = [];
  const kernels: BackendKernels = {
    kind: 'cpu',
    label: opts.label ?? 'test backend',
    hostValues: opts.valuesOnHost ? (t) => (t as unknown as { data: number[] }).data : undefined,
    ...(opts.tensorLimit ? { tensorLimit: opts.tensorLimit } : {}),
    tensor(dtype: DType, shape: Shape, data) {
      made.push(shape);
      const t = { dtype, shape, strides: shape.map((_, i) => shape.slice(i + 1).reduce((n, d) => n * d, 1)), backend: 'cpu', disposed: false, data: data ?? [], [TENSOR_OWNER]: kernels } as any;
      t.dispose = () => {
        t.disposed = true;
      };
      return t as OwnedTensor;
    },
    tensorFromBytes(dtype: DType, shape: Shape, bytes) {
      return kernels.tensor(dtype, shape, bytes);
    },
    view(base, shape, layout) {
      const root = layoutOf(base);
      return { dtype: base.dtype, shape, strides: layout.strides, backend: 'cpu', disposed: false, [TENSOR_OWNER]: kernels, [TENSOR_LAYOUT]: { ...root, ...layout }, dispose() {} } as OwnedTensor;
    },
    read: async () => new Float32Array(),
    readBytes: async () => new ArrayBuffer(0),
    fusedNormRopeStacked(args) {
      calls.push({ op: 'fusedNormRopeStacked', args });
      return { kOut: args.kv, vOut: args.kv };
    },
    createKvMaterializer(args) {
      calls.push({ op: 'createKvMaterializer', args });
      return {
        materialize: (a) => calls.push({ op: 'materialize', args: a }),
        materializeInto: (a) => calls.push({ op: 'materializeInto', args: a }),
        dispose: () => {},
      };
    },
    ropePoolFused(args) {
      calls.push({ op: 'ropePoolFused', args });
      return { qRot: args.q, kRot: args.k };
    },
    mlaPoolFused(args) {
      calls.push({ op: 'mlaPoolFused', args });
      return args.q ? { qRot: args.q } : {};
    },
    dequantizeKv(args) {
      calls.push({ op: 'dequantizeKv', args });
    },
    sync: async () => {},
    flush: () => {},
    dispose: () => {},
  };
  return { backend: defineBackend(kernels), calls, made };
}

function thrown(f: () => unknown): ContractError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(ContractError);
    return e as ContractError;
  }
  throw new Error('expected a ContractError');
}

function fusedArgs(b: ReturnType<typeof recordingBackend>['backend'], positions = [0, 1, 2, 3]) {
  return {
    kv: b.tensor('bf16', [4, 2, 32]),
    kNormWeight: b.tensor('f32', [2, 8]),
    eps: b.tensor('f32', [2]),
    cosSinCache: b.tensor('f32', [16, 8]),
    positions: b.tensor('i32', [4], positions),
    numKvHeads: 2,
    headDim: 8,
    rotaryDim: 8,
  };
}

describe('generated validators', () => {
  it('hand the kernels bound dims and defaults', () => {
    const { backend, calls } = recordingBackend();
    backend.fusedNormRopeStacked(fusedArgs(backend));
    expect(calls).toHaveLength(1);
    expect(calls[0]!.args.dims).toEqual({ H: 2, D: 8, R: 8, T: 4, L: 2, P: 16 });
    expect(calls[0]!.args.ropeStyle).toBe('neox');
    expect(calls[0]!.args.kOut).toBeUndefined();
  });

  it('reject before any kernel runs, naming the dims bound so far', () => {
    const { backend, calls } = recordingBackend();
    const e = thrown(() => backend.fusedNormRopeStacked({ ...fusedArgs(backend), kv: backend.tensor('bf16', [4, 64]) as any }));
    expect(e.code).toBe('KV010');
    expect(e.message).toMatch(/^\[KV010\] fusedNormRopeStacked: kv must be 3-D \[T, L, 2\*H\*D\]; got shape \[4, 64\]\. H=2 D=8 R=8\. Run npx kvkit explain KV010$/);
    expect(calls).toEqual([]);
  });

  it('bind a dim at its first axis and compare it everywhere after', () => {
    const { backend } = recordingBackend();
    const e = thrown(() => backend.fusedNormRopeStacked({ ...fusedArgs(backend), kOut: backend.empty('bf16', [4, 2, 2, 8]) as any }));
    expect(e.code).toBe('KV014');
    expect(e.message).toContain('kOut has shape [4, 2, 2, 8]; expected [L, T, H, D] = [2, 4, 2, 8]');
    expect(e.details.dims).toEqual({ H: 2, D: 8, R: 8, T: 4, L: 2, P: 16 });
  });

  it('report an unknown argument before anything else, so a misspelt optional one is not dropped', () => {
    const { backend } = recordingBackend();
    const e = thrown(() => backend.fusedNormRopeStacked({ ...fusedArgs(backend), rope_style: 'gptj' } as any));
    expect(e.code).toBe('KV043');
    expect(e.message).toContain('rope_style is not an argument of fusedNormRopeStacked');
  });

  it('check values on the host where the backend holds them there', () => {
    const { backend, calls } = recordingBackend({ valuesOnHost: true });
    const e = thrown(() => backend.fusedNormRopeStacked(fusedArgs(backend, [0, 1, 16, 3])));
    expect(e.code).toBe('KV017');
    expect(e.message).toContain('positions[2] = 16 is outside the cos/sin cache rows [0, 16)');
    expect(calls).toEqual([]);
  });

  it('hand value rules to the device, bounds resolved, where the values are not on the host', () => {
    const { backend, calls } = recordingBackend();
    backend.fusedNormRopeStacked(fusedArgs(backend, [0, 1, 99, 3]));
    const [check] = calls[0]!.args.deviceChecks;
    expect(check).toMatchObject({ arg: 'positions', min: 0, below: 16, negativeSkips: false, code: 'KV017', op: 'fusedNormRopeStacked' });
  });

  it('tell backends apart, and dead tensors from live ones', () => {
    const a = recordingBackend({ label: 'backend A' });
    const b = recordingBackend({ label: 'backend B' });
    const args = fusedArgs(a.backend);
    const e = thrown(() => b.backend.fusedNormRopeStacked(args));
    expect(e.code).toBe('KV002');
    expect(e.message).toContain('kv was made by backend A; this call runs on backend B');
    args.eps.dispose();
    expect(thrown(() => a.backend.fusedNormRopeStacked(args)).code).toBe('KV003');
  });

  it('carry the constructor dims into the materializer calls', () => {
    const { backend, calls } = recordingBackend();
    const m = backend.createKvMaterializer({
      kvWeight: backend.tensor('f16', [2, 32, 64]),
      kNormWeight: backend.tensor('f16', [2, 8]),
      eps: 1e-6,
      numKvHeads: 2,
      headDim: 8,
      ropeBase: 10000,
    });
    expect(calls[0]!.args.rotaryDim).toBe(8);
    m.materialize({ ctxHidden: backend.tensor('f16', [3, 64]), positions: backend.tensor('i64', [1, 3]), writeLayerKv: () => {} });
    expect(calls[1]!.args.dims).toMatchObject({ L: 2, H: 2, D: 8, R: 8, hidden: 64, T: 3 });
    const e = thrown(() => m.materialize({ ctxHidden: backend.tensor('f16', [3, 64]), positions: backend.tensor('i64', [2]) as any, writeLayerKv: () => {} }));
    expect(e.code).toBe('KV023');
    expect(e.message).toContain('positions holds 2 entries; expected [T] = [3], one per token of ctxHidden');
    expect(thrown(() => m.materialize({ ctxHidden: backend.tensor('f32', [3, 64]) as any, positions: backend.tensor('i64', [3]), writeLayerKv: () => {} })).code).toBe('KV005');
  });

  it("read a materializer's [3, 1] positions as three tokens without mropeSection and as one token's streams with it", () => {
    const { backend, calls } = recordingBackend();
    const m = backend.createKvMaterializer({ kvWeight: backend.tensor('f32', [1, 16, 4]), kNormWeight: backend.tensor('f32', [1, 4]), eps: 1e-6, numKvHeads: 2, headDim: 4, ropeBase: 10000 });
    const positions = backend.tensor('i32', [3, 1], [5, 6, 7]);
    m.materialize({ ctxHidden: backend.tensor('f32', [3, 4]), positions, writeLayerKv: () => {} });
    expect(calls[1]!.args.dims).toMatchObject({ T: 3 });
    m.materializeInto({ ctxHidden: backend.tensor('f32', [1, 4]), positions, mropeSection: [1, 1, 0], kPool: backend.tensor('f32', [1, 2, 2, 4]), vPool: backend.tensor('f32', [1, 2, 2, 4]), slots: backend.tensor('i32', [1], [0]) });
    expect(calls[2]!.args).toMatchObject({ mropeSection: [1, 1, 0], dims: { T: 1 } });
    const e = thrown(() => m.materialize({ ctxHidden: backend.tensor('f32', [1, 4]), positions: backend.tensor('i32', [1, 1], [5]), mropeSection: [0, 2, 0], writeLayerKv: () => {} }));
    expect(e.code).toBe('KV067');
    expect(thrown(() => m.materialize({ ctxHidden: backend.tensor('f32', [2, 4]), positions: backend.tensor('i32', [3, 2]), writeLayerKv: () => {} })).code).toBe('KV066');
  });

  it('take mropeInterleaved beside mropeSection only, its height and width strides inside the R/2 pairs', () => {
    const { backend, calls } = recordingBackend();
    const [N, Hd] = [2, 8];
    const rope = (extra: Record<string, unknown>) =>
      backend.ropePoolFused({
        q: backend.tensor('f32', [N, 1, Hd]),
        k: backend.tensor('f32', [N, 1, Hd]),
        v: backend.tensor('f32', [N, 1, Hd]),
        positions: backend.tensor('i32', [3, N]),
        slots: backend.tensor('i32', [N]),
        kPool: backend.tensor('f32', [4, 1, Hd]),
        vPool: backend.tensor('f32', [4, 1, Hd]),
        numQoHeads: 1,
        numKvHeads: 1,
        headDim: Hd,
        ropeBase: 10000,
        ...(extra as object),
      });
    // R/2 = 4: height takes pair 1, width pair 2, temporal pairs 0 and 3.
    rope({ mropeSection: [2, 1, 1], mropeInterleaved: true });
    rope({ mropeSection: [2, 1, 1] });
    expect(calls.map((c) => c.args.mropeInterleaved)).toEqual([true, false]);
    const missing = thrown(() => rope({ mropeInterleaved: true, positions: backend.tensor('i32', [N]) }));
    expect(missing.code).toBe('KV086');
    expect(missing.message).toContain('mropeInterleaved is true but mropeSection is missing');
    // Two height pairs need pairs 1 and 4: past the last pair, 3.
    const wide = thrown(() => rope({ mropeSection: [1, 2, 1], mropeInterleaved: true }));
    expect(wide.code).toBe('KV087');
    expect(wide.message).toContain("mropeSection = [1, 2, 1] does not fit interleaved among R/2 = 4 rotary pairs: the height stream's 2 pairs (1, 4, ..., 4) run past pair 3");
    expect(thrown(() => rope({ mropeSection: [1, 1, 2], mropeInterleaved: true })).message).toContain("the width stream's 2 pairs (2, 5, ..., 5) run past pair 3");
    expect(thrown(() => rope({ mropeSection: [2, 1, 1], mropeInterleaved: 'yes' })).code).toBe('KV044');
    // false needs nothing beside it.
    rope({ mropeInterleaved: false, positions: backend.tensor('i32', [N]) });
    expect(calls).toHaveLength(3);
  });

  it('refuse the positional materialize(ctxHidden, positions, writeLayerKv) with KV044, saying it takes one object', () => {
    const { backend, calls } = recordingBackend();
    const m = backend.createKvMaterializer({ kvWeight: backend.tensor('f32', [1, 4, 8]), kNormWeight: backend.tensor('f32', [1, 2]), eps: 1e-6, numKvHeads: 1, headDim: 2, ropeBase: 10000 });
    const positional = m.materialize as unknown as (...a: unknown[]) => void;
    let called = false;
    const e = thrown(() => positional(backend.tensor('f32', [2, 8]), backend.tensor('i32', [2]), () => (called = true)));
    expect(e.code).toBe('KV044');
    expect(e.message).toContain('arguments must be one object of named arguments, KvMaterializer.materialize({ ctxHidden, mropeSection, mropeInterleaved, positions, writeLayerKv }); got 3 positional arguments');
    // A tensor alone where the object belongs says the same.
    expect(thrown(() => positional(backend.tensor('f32', [2, 8]))).message).toContain('KvMaterializer.materialize({ ctxHidden, mropeSection, mropeInterleaved, positions, writeLayerKv }); got a Tensor');
    expect(called).toBe(false);
    expect(calls.map((c) => c.op)).toEqual(['createKvMaterializer']);
  });

  it('refuse a materializer with both or neither rope source', () => {
    const { backend } = recordingBackend();
    const args = { kvWeight: backend.tensor('f16', [2, 32, 64]), kNormWeight: backend.tensor('f16', [2, 8]), eps: 1e-6, numKvHeads: 2, headDim: 8 };
    expect(thrown(() => backend.createKvMaterializer(args)).message).toContain('got neither');
    const both = { ...args, ropeBase: 1e4, cosSinCache: backend.tensor('f32', [8, 8]) };
    expect(thrown(() => backend.createKvMaterializer(both)).message).toContain('got cosSinCache and ropeBase');
  });

  it('hand pool-writing kernels the contract\'s rule for tokens naming one slot', () => {
    const { backend, calls } = recordingBackend();
    const [N, H, D, S] = [3, 2, 8, 4];
    backend.ropePoolFused({
      q: backend.tensor('f16', [N, H, D]),
      k: backend.tensor('f16', [N, H, D]),
      v: backend.tensor('f16', [N, H, D]),
      positions: backend.tensor('i32', [N]),
      slots: backend.tensor('i32', [N]),
      kPool: backend.tensor('f16', [S, H, D]),
      vPool: backend.tensor('f16', [S, H, D]),
      numQoHeads: H,
      numKvHeads: H,
      headDim: D,
      ropeBase: 10000,
    });
    const m = backend.createKvMaterializer({ kvWeight: backend.tensor('f16', [1, 2 * H * D, 16]), kNormWeight: backend.tensor('f16', [1, D]), eps: 1e-6, numKvHeads: H, headDim: D, ropeBase: 1e4 });
    m.materializeInto({ ctxHidden: backend.tensor('f16', [N, 16]), positions: backend.tensor('i64', [N]), kPool: backend.tensor('f16', [1, S, H, D]), vPool: backend.tensor('f16', [1, S, H, D]), slots: backend.tensor('i64', [N]) });
    expect(calls.find((c) => c.op === 'ropePoolFused')!.args.duplicates).toEqual({ slots: 'last' });
    expect(calls.find((c) => c.op === 'materializeInto')!.args.duplicates).toEqual({ slots: 'last' });
  });
});

describe('mlaPoolFused and pagedAttention over an MLA pool', () => {
  const mla = (b: ReturnType<typeof recordingBackend>['backend'], over: Record<string, unknown> = {}) =>
    (b.mlaPoolFused as (a: unknown) => unknown)({
      kvLatent: b.tensor('bf16', [3, 40]),
      kvNormWeight: b.tensor('f32', [32]),
      eps: 1e-6,
      q: b.tensor('bf16', [3, 4, 24]),
      positions: b.tensor('i32', [3], [0, 1, 2]),
      slots: b.tensor('i32', [3], [0, 1, 2]),
      pool: b.empty('bf16', [6, 1, 40]),
      kvLoraRank: 32,
      qkRopeHeadDim: 8,
      ropeBase: 10000,
      ...over,
    });

  it('binds the latent row as a sum of dims, the query head dim from q, and defaults to DeepSeek\'s interleaved pairs', () => {
    const { backend, calls } = recordingBackend();
    mla(backend);
    expect(calls[0]!.args.dims).toEqual({ C: 32, R: 8, N: 3, Hq: 4, Dq: 24, S: 6 });
    expect(calls[0]!.args.ropeStyle).toBe('gptj');
    mla(backend, { q: undefined, layout: 'HND', pool: backend.empty('bf16', [2, 1, 3, 40]) });
    expect(calls[1]!.args.dims).toEqual({ C: 32, R: 8, N: 3, numPages: 2, pageSize: 3, S: 6 });
  });

  it('says what the latent row, the query heads and the pool must be, with the dims bound', () => {
    const { backend, calls } = recordingBackend();
    expect(thrown(() => mla(backend, { kvLatent: backend.tensor('bf16', [3, 32]) })).message).toContain('kvLatent has shape [3, 32]; expected [N, C+R] = [3, 40]');
    const narrow = thrown(() => mla(backend, { q: backend.tensor('bf16', [3, 4, 6]) }));
    expect(narrow.code).toBe('KV093');
    expect(narrow.message).toContain('its head dim 6 is below qkRopeHeadDim = 8');
    expect(thrown(() => mla(backend, { pool: backend.empty('bf16', [6, 40]) })).code).toBe('KV094');
    expect(thrown(() => mla(backend, { pool: backend.empty('fp8e4m3', [6, 1, 40]) })).code).toBe('KV095');
    expect(thrown(() => mla(backend, { qkRopeHeadDim: 7, kvLatent: backend.tensor('bf16', [3, 39]) })).code).toBe('KV096');
    expect(calls).toEqual([]);
  });

  it("takes V as the first vHeadDim values of each row, at most headDim, out [N, Hq, vHeadDim]", () => {
    const { backend } = recordingBackend();
    const pool = backend.empty('bf16', [8, 1, 40]);
    const args = { q: backend.tensor('bf16', [2, 4, 40]), kPool: pool, vPool: pool, qIndptr: backend.tensor('i32', [2], [0, 2]), kvIndptr: backend.tensor('i32', [2], [0, 3]), kvSlots: backend.tensor('i32', [3], [0, 1, 2]), numQoHeads: 4, numKvHeads: 1, headDim: 40 };
    const attend = (over: Record<string, unknown>) => (backend.pagedAttention as (a: unknown) => unknown)({ ...args, ...over });
    // The validator alone (the recording kernels run no attention): the dims it hands a kernel.
    const ctx = { owner: (pool as unknown as Record<symbol, object>)[TENSOR_OWNER]!, label: 'test backend' };
    expect(validatePagedAttention({ ...args, vHeadDim: 32 }, ctx).dims).toMatchObject({ D: 40, Dv: 32 });
    expect(validatePagedAttention(args, ctx).dims).toMatchObject({ D: 40, Dv: 40 });
    expect(thrown(() => attend({ vHeadDim: 41 })).message).toContain('vHeadDim = 41 is above headDim = 40');
    expect(thrown(() => attend({ vHeadDim: 32, out: backend.empty('bf16', [2, 4, 40]) })).code).toBe('KV081');
  });
});

describe('ropeScaling', () => {
  const [N, H, D] = [3, 2, 8];
  const call = (b: ReturnType<typeof recordingBackend>['backend'], extra: Record<string, unknown>) =>
    b.ropePoolFused({
      q: b.tensor('f16', [N, H, D]),
      k: b.tensor('f16', [N, H, D]),
      v: b.tensor('f16', [N, H, D]),
      positions: b.tensor('i32', [N]),
      slots: b.tensor('i32', [N]),
      kPool: b.tensor('f16', [4, H, D]),
      vPool: b.tensor('f16', [4, H, D]),
      numQoHeads: H,
      numKvHeads: H,
      headDim: D,
      ropeBase: 10000,
      ...(extra as object),
    });
  const llama3 = { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 };
  // R = D = 8 here: four rotary pairs.
  const longrope = { type: 'longrope', shortFactor: [1, 1, 1, 1], longFactor: [1, 2, 4, 8], originalMaxPositions: 4096 };

  it('hands the kernel the scaling with its defaults filled in, and the angle convention', () => {
    const { backend, calls } = recordingBackend();
    call(backend, { ropeScaling: { type: 'yarn', factor: 4, originalMaxPositions: 32768 }, angles: 'float32' });
    call(backend, {});
    const [scaled, plain] = calls.filter((c) => c.op === 'ropePoolFused').map((c) => c.args);
    expect(scaled.ropeScaling).toEqual({ type: 'yarn', factor: 4, originalMaxPositions: 32768, betaFast: 32, betaSlow: 1 });
    expect(scaled.angles).toBe('float32');
    expect(plain.ropeScaling).toBeUndefined();
    expect(plain.angles).toBe('exact');
  });

  it("takes YaRN with betaFast equal to betaSlow (Kimi K2's 1 and 1)", () => {
    const { backend, calls } = recordingBackend();
    call(backend, { ropeScaling: { type: 'yarn', factor: 32, originalMaxPositions: 4096, betaFast: 1, betaSlow: 1, mscale: 1, mscaleAllDim: 1 } });
    expect(calls.find((c) => c.op === 'ropePoolFused')?.args.ropeScaling).toMatchObject({ betaFast: 1, betaSlow: 1 });
  });

  it.each([
    ['KV060', 'a string', 'llama3', 'ropeScaling must be an object with type: linear | dynamic | llama3 | yarn | longrope; got "llama3"'],
    ['KV060', 'an unknown type', { type: 'su', factor: 2 }, 'ropeScaling.type must be linear | dynamic | llama3 | yarn | longrope; got "su"'],
    ['KV061', 'longrope without longFactor', { type: 'longrope', shortFactor: [1, 1, 1, 1], originalMaxPositions: 4096 }, 'ropeScaling.longFactor is missing; it is a field of longrope scaling'],
    ['KV062', 'a zero longrope attentionFactor', { ...longrope, attentionFactor: 0 }, 'ropeScaling.attentionFactor must be a finite number > 0; got 0'],
    ['KV062', 'a longrope context of one token', { ...longrope, originalMaxPositions: 1 }, 'ropeScaling.originalMaxPositions must be an integer > 1; got 1'],
    ['KV064', 'a longrope factor below 1', { ...longrope, factor: 0.5 }, 'ropeScaling.factor = 0.5 is below 1'],
    ['KV084', 'a factor list of headDim / 2 for a partial rotary', { ...longrope, shortFactor: [1, 1, 1, 1, 1, 1, 1, 1] }, 'ropeScaling.shortFactor must be a list of R/2 = 4 numbers, one per rotary pair; got 8 entries'],
    ['KV084', 'one number for every pair', { ...longrope, longFactor: 2 }, 'ropeScaling.longFactor must be a list of R/2 = 4 numbers, one per rotary pair; got 2'],
    ['KV085', 'a zero factor', { ...longrope, longFactor: [1, 2, 0, 4] }, 'ropeScaling.longFactor[2] = 0; every factor must be a finite number > 0'],
    ['KV085', 'a factor as a string', { ...longrope, shortFactor: [1, '1.5', 1, 1] }, 'ropeScaling.shortFactor[1] = "1.5"; every factor must be a finite number > 0'],
    ['KV061', 'a Hugging Face key', { ...llama3, low_freq_factor: 1 }, 'ropeScaling.low_freq_factor is not a field of llama3 scaling, whose fields are factor, lowFreqFactor, highFreqFactor, originalMaxPositions'],
    ['KV061', 'a missing field', { type: 'dynamic', factor: 2 }, 'ropeScaling.originalMaxPositions is missing; it is a field of dynamic scaling'],
    ['KV062', 'a non-integer context', { ...llama3, originalMaxPositions: 8192.5 }, 'ropeScaling.originalMaxPositions must be an integer > 0; got 8192.5'],
    ['KV062', 'a NaN factor', { type: 'linear', factor: Number.NaN }, 'ropeScaling.factor must be a finite number >= 1; got NaN'],
    ['KV063', 'inverted llama3 factors', { ...llama3, lowFreqFactor: 4, highFreqFactor: 4 }, 'ropeScaling: lowFreqFactor = 4 must be below highFreqFactor = 4'],
    ['KV063', 'inverted YaRN betas', { type: 'yarn', factor: 4, originalMaxPositions: 4096, betaSlow: 40 }, 'ropeScaling: betaSlow = 40 must be at most betaFast = 32'],
    ['KV064', 'a factor below 1', { type: 'linear', factor: 0.5 }, 'ropeScaling.factor = 0.5 is below 1: a scaling factor stretches the context'],
  ])('is %s for %s, before any kernel runs', (code, _, ropeScaling, message) => {
    const { backend, calls } = recordingBackend();
    const e = thrown(() => call(backend, { ropeScaling }));
    expect(e.code).toBe(code);
    expect(e.message).toContain(message);
    expect(calls).toHaveLength(0);
  });

  it('hands the kernel a copy of the LongRoPE lists, frozen, so a change to the caller\'s arrays changes nothing', () => {
    const { backend, calls } = recordingBackend();
    const shortFactor = [1, 1.5, 2, 3];
    call(backend, { ropeScaling: { ...longrope, shortFactor, factor: 32 } });
    shortFactor[0] = 9;
    const [args] = calls.map((c) => c.args);
    expect(args.ropeScaling).toEqual({ ...longrope, shortFactor: [1, 1.5, 2, 3], factor: 32 });
    expect(Object.isFrozen(args.ropeScaling.shortFactor)).toBe(true);
  });

  it("is KV009 for an unknown angle convention, and KV063 for a scaling next to a materializer's ready cache", () => {
    const { backend } = recordingBackend();
    expect(thrown(() => call(backend, { angles: 'float64' })).code).toBe('KV009');
    const args = { kvWeight: backend.tensor('f16', [1, 32, 16]), kNormWeight: backend.tensor('f16', [1, 8]), eps: 1e-6, numKvHeads: 2, headDim: 8 };
    const e = thrown(() => backend.createKvMaterializer({ ...args, cosSinCache: backend.tensor('f32', [8, 8]), ropeScaling: { type: 'linear', factor: 2 } }));
    expect(e.code).toBe('KV063');
    expect(e.message).toContain('it applies to ropeBase only');
    backend.createKvMaterializer({ ...args, ropeBase: 1e4, ropeScaling: { type: 'linear', factor: 2 } });
  });
});

describe('tensor creation', () => {
  it('asks the backend for its limit and names it in KV045, reserving nothing', () => {
    const { backend, made } = recordingBackend({
      label: 'small backend',
      tensorLimit: (dtype) => ({ elements: dtype === 'f32' ? 1000 : 2000, reason: 'its buffers hold 4000 bytes' }),
    });
    backend.empty('bf16', [20, 100]);
    const e = thrown(() => backend.empty('f32', [2, 501]));
    expect(e.code).toBe('KV045');
    expect(e.message).toContain('f32 tensor of shape [2, 501] (1002 elements) is more than small backend holds in one: at most 1000 elements (its buffers hold 4000 bytes)');
    expect(thrown(() => backend.tensor('bf16', [2001], [])).code).toBe('KV045');
    expect(made).toEqual([[20, 100]]);
  });

  it('holds 2^31 - 1 elements where the backend states no limit', () => {
    const { backend } = recordingBackend();
    backend.empty('f32', [2 ** 31 - 1]);
    const e = thrown(() => backend.empty('i64', [2 ** 16, 2 ** 15]));
    expect(e.message).toContain('at most 2147483647 elements (elements are indexed with 32-bit signed integers)');
  });
});

describe('reading', () => {
  it('refuses, with KV045 naming the host, a tensor of more elements than one typed array holds, and reads one of 2^32', async () => {
    const { backend } = recordingBackend({ tensorLimit: () => ({ elements: 2 ** 40, reason: 'a device of 1 TiB' }) });
    const huge = backend.empty('fp8e4m3', [2 ** 22 + 1, 1024]);
    for (const read of [() => backend.read(huge), () => backend.readBits(huge)]) {
      const e = (await read().then(
        () => undefined,
        (x: unknown) => x,
      )) as ContractError;
      expect(e).toBeInstanceOf(ContractError);
      expect(e.code).toBe('KV045');
      expect(e.message).toContain('fp8e4m3 tensor of shape [4194305, 1024] (4294968320 elements) is more than the host holds in one: at most 4294967296 elements');
      expect(e.message).toMatch(/returns one JavaScript typed array; read views of the tensor \(backend\.view\)/);
    }
    await backend.read(backend.empty('fp8e4m3', [2 ** 22, 1024]));
    await backend.read(backend.view(huge, [2 ** 22, 1024], { offset: 1024 }));
  });
});

describe('tensorFromBits', () => {
  it('hands the bits to the kernels as bytes, unconverted, and refuses an array of another layout', () => {
    const { backend } = recordingBackend();
    const bits = Uint16Array.from([0x3f80, 0x7fc1, 0x8000]);
    const t = backend.tensorFromBits('bf16', [3], bits) as unknown as { data: Uint8Array };
    expect(Array.from(new Uint16Array(t.data.buffer, t.data.byteOffset, 3))).toEqual([0x3f80, 0x7fc1, 0x8000]);
    expect(t.data.byteLength).toBe(6);
    backend.tensorFromBits('f32', [2], new Uint32Array(2));
    backend.tensorFromBits('f32', [2], new Float32Array(2));
    const e = thrown(() => backend.tensorFromBits('f16', [3], Float32Array.from([1, 2, 3]) as never));
    expect(e.code).toBe('KV044');
    expect(e.message).toContain('bits must be a Uint16Array (the f16 bits as stored); got a Float32Array');
    expect(thrown(() => backend.tensorFromBits('i64', [1], [1n] as never)).message).toContain('got an Array of length 1');
    expect(thrown(() => backend.tensorFromBits('f32', [4], new Uint32Array(5))).code).toBe('KV041');
  });

  it('sees only the bytes of a subarray', () => {
    const { backend } = recordingBackend();
    const whole = Uint16Array.from([1, 2, 3, 4, 5]);
    const t = backend.tensorFromBits('f16', [2], whole.subarray(2, 4)) as unknown as { data: Uint8Array };
    expect(Array.from(new Uint16Array(t.data.slice().buffer))).toEqual([3, 4]);
  });
});

describe('declared calls', () => {
  // One bad input per way each call can fail; the codes seen must be exactly the codes declared.
  const disposedBackend = () => {
    const { backend } = recordingBackend();
    backend.dispose();
    return backend;
  };
  const attempts: Record<string, ((b: ReturnType<typeof recordingBackend>['backend'], other: ReturnType<typeof recordingBackend>['backend']) => unknown)[]> = {
    tensor: [
      () => disposedBackend().tensor('f32', [1], [1]),
      (b) => b.tensor('f64' as never, [2], [1, 2]),
      (b) => b.tensor('f32', [2, -1]),
      (b) => b.tensor('f32', [65536, 65536]),
      (b) => b.tensor('f32', [2], 'ab' as never),
      (b) => b.tensor('f32', [3], [1, 2]),
      (b) => b.tensor('i32', [2], [1, 0.5]),
    ],
    tensorFromBits: [
      () => disposedBackend().tensorFromBits('f16', [1], new Uint16Array(1)),
      (b) => b.tensorFromBits('u16' as never, [2], new Uint16Array(2) as never),
      (b) => b.tensorFromBits('bf16', [-2], new Uint16Array(2)),
      (b) => b.tensorFromBits('f16', [65536, 65536], new Uint16Array(2)),
      (b) => b.tensorFromBits('f16', [2], new Float32Array(2) as never),
      (b) => b.tensorFromBits('bf16', [3], new Uint16Array(2)),
    ],
    empty: [() => disposedBackend().empty('f32', [1]), (b) => b.empty('u8' as never, [2]), (b) => b.empty('f32', [1.5]), (b) => b.empty('f32', [65536, 32768, 2])],
    read: [
      (b) => b.read({} as never),
      (b, other) => b.read(other.tensor('f32', [1], [1])),
      (b) => {
        const t = b.tensor('f32', [1], [1]);
        t.dispose();
        return b.read(t);
      },
      (b) => b.read(Object.assign(b.tensor('f32', [1], [1]), { disposed: true, [LAYER_VIEW]: 0 })),
      (b) => b.read(Object.assign(b.tensor('f32', [1], [1]), { shape: [2 ** 32 + 1] })),
    ],
    readBits: [
      (b) => b.readBits({} as never),
      (b, other) => b.readBits(other.tensor('f32', [1], [1])),
      (b) => {
        const t = b.tensor('f32', [1], [1]);
        t.dispose();
        return b.readBits(t);
      },
      (b) => b.readBits(Object.assign(b.tensor('f32', [1], [1]), { disposed: true, [LAYER_VIEW]: 0 })),
      (b) => b.readBits(Object.assign(b.tensor('f32', [1], [1]), { shape: [2 ** 32 + 1] })),
    ],
    ropeCosSinCache: [
      (b) => ropeCosSinCache(b, { rotaryDim: 8, ropeBase: 1e4, positions: 4, dtype: 'i32' as never }),
      (b) => ropeCosSinCache(b, { rotaryDim: 0, ropeBase: 1e4, positions: 4 }),
      (b) => ropeCosSinCache(b, { rotaryDim: 7, ropeBase: 1e4, positions: 4 }),
      (b) => ropeCosSinCache(b, { rotaryDim: 8, ropeBase: -1, positions: 4 }),
      (b) => ropeCosSinCache(b, { rotaryDim: 8, ropeBase: 1e4, positions: 4, angles: 'f64' as never }),
      (b) => ropeCosSinCache(b, { rotaryDim: 8, ropeBase: 1e4, positions: 4, headDim: 8 } as never),
      (b) => (ropeCosSinCache as (...a: unknown[]) => unknown)(b, 8),
      (b) => ropeCosSinCache(b, { rotaryDim: 8, ropeBase: 1e4, positions: 4, ropeScaling: { type: 'ntk' } as never }),
      (b) => ropeCosSinCache(b, { rotaryDim: 8, ropeBase: 1e4, positions: 4, ropeScaling: { type: 'linear' } as never }),
      (b) => ropeCosSinCache(b, { rotaryDim: 8, ropeBase: 1e4, positions: 4, ropeScaling: { type: 'dynamic', factor: 2, originalMaxPositions: -1 } }),
      (b) => ropeCosSinCache(b, { rotaryDim: 8, ropeBase: 1e4, positions: 4, ropeScaling: { type: 'llama3', factor: 2, lowFreqFactor: 5, highFreqFactor: 4, originalMaxPositions: 64 } }),
      (b) => ropeCosSinCache(b, { rotaryDim: 8, ropeBase: 1e4, positions: 4, ropeScaling: { type: 'linear', factor: 0.9 } }),
      (b) => ropeCosSinCache(b, { rotaryDim: 8, ropeBase: 1e4, positions: 4, ropeScaling: { type: 'longrope', shortFactor: [1, 1, 1], longFactor: [1, 2, 3, 4], originalMaxPositions: 64 } }),
      (b) => ropeCosSinCache(b, { rotaryDim: 8, ropeBase: 1e4, positions: 4, ropeScaling: { type: 'longrope', shortFactor: [1, 1, 1, 1], longFactor: [1, 2, Number.NaN, 4], originalMaxPositions: 64 } }),
    ],
    view: [
      () => disposedBackend().view(disposedBackend().tensor('f32', [1]), [1]),
      (b) => b.view({} as never, [1]),
      (b, other) => b.view(other.tensor('f32', [2]), [1]),
      (b) => {
        const t = b.tensor('f32', [2]);
        t.dispose();
        return b.view(t, [1]);
      },
      (b) => b.view(Object.assign(b.tensor('f32', [1], [1]), { disposed: true, [LAYER_VIEW]: 0 }), [1]),
      (b) => b.view(b.tensor('f32', [2]), [0.5]),
      (b) => b.view(b.tensor('f32', [2]), [65536, 65536], { strides: [0, 0] }),
      (b) => b.view(b.tensor('f32', [2]), [1], { stride: [1] } as never),
      (b) => b.view(b.tensor('f32', [2]), [1], 4 as never),
      (b) => b.view(b.tensor('f32', [2]), [2], { strides: [1, 1] }),
      (b) => b.view(b.tensor('f32', [2]), [2], { offset: 1 }),
    ],
    splitQkv: [
      () => disposedBackend().splitQkv(disposedBackend().tensor('f32', [1, 4]), { numQoHeads: 1, numKvHeads: 1, headDim: 1 }),
      (b) => b.splitQkv({} as never, { numQoHeads: 1, numKvHeads: 1, headDim: 1 }),
      (b, other) => b.splitQkv(other.tensor('f32', [1, 3]), { numQoHeads: 1, numKvHeads: 1, headDim: 1 }),
      (b) => {
        const t = b.tensor('f32', [1, 3]);
        t.dispose();
        return b.splitQkv(t, { numQoHeads: 1, numKvHeads: 1, headDim: 1 });
      },
      (b) => b.splitQkv(Object.assign(b.tensor('f32', [1, 3]), { disposed: true, [LAYER_VIEW]: 0 }), { numQoHeads: 1, numKvHeads: 1, headDim: 1 }),
      (b) => b.splitQkv(b.tensor('i32', [1, 3]), { numQoHeads: 1, numKvHeads: 1, headDim: 1 }),
      (b) => b.splitQkv(b.tensor('f32', [1, 3]), { numQoHeads: 1, numKvHeads: 1, headDim: 1, heads: 3 } as never),
      (b) => b.splitQkv(b.tensor('f32', [1, 3]), 3 as never),
      (b) => b.splitQkv(b.tensor('f32', [1, 3]), { numQoHeads: 0, numKvHeads: 1, headDim: 1 }),
      (b) => b.splitQkv(b.tensor('f32', [1, 4]), { numQoHeads: 1, numKvHeads: 1, headDim: 1 }),
    ],
    sync: [() => disposedBackend().sync()],
    flush: [() => disposedBackend().flush()],
    prepare: [(b) => b.prepare('noSuchOp' as never, {} as never), () => disposedBackend().prepare('dequantizeKv', {} as never)],
  };

  it.each(allCalls.map((c) => [c.name, c] as const))('%s raises exactly the codes its declaration lists', async (name, call) => {
    const { backend } = recordingBackend();
    const { backend: other } = recordingBackend({ label: 'other backend' });
    const seen = new Set<string>();
    for (const attempt of attempts[name]!) {
      try {
        await attempt(backend, other);
      } catch (e) {
        expect(e).toBeInstanceOf(ContractError);
        seen.add((e as ContractError).code);
      }
    }
    expect([...seen].sort()).toEqual([...call.raises].sort());
  });
});

describe('views', () => {
  it('compose: offsets add up in the base storage, strides are the storage\'s', () => {
    const { backend } = recordingBackend();
    const base = backend.tensor('f32', [4, 6]);
    const row = backend.view(base, [6], { offset: 6 });
    const cols = backend.view(row, [3], { strides: [2], offset: 1 });
    expect(layoutOf(cols as unknown as OwnedTensor)).toMatchObject({ offset: 7, strides: [2], capacity: 24 });
    expect(cols.strides).toEqual([2]);
  });

  it('refuse bad strides, rank mismatches and spans past the storage before anything is made', () => {
    const { backend } = recordingBackend();
    const base = backend.tensor('f32', [4, 6]);
    expect(thrown(() => backend.view(base, [2, 3], { strides: [3] })).code).toBe('KV046');
    expect(thrown(() => backend.view(base, [2, 3], { strides: [3, -1] })).code).toBe('KV046');
    expect(thrown(() => backend.view(base, [2, 3], { strides: [3, 1.5] })).code).toBe('KV046');
    expect(thrown(() => backend.view(base, [2], { offset: -2 })).code).toBe('KV046');
    expect(thrown(() => backend.view(base, [4, 6], { offset: 1 })).code).toBe('KV047');
    expect(thrown(() => backend.view(base, [2, 6], { strides: [19, 1] })).code).toBe('KV047');
    expect(backend.view(base, [2, 6], { strides: [12, 1] }).shape).toEqual([2, 6]);
  });

  it('splitQkv gives q, k and v at their head offsets, flat or with a head axis', () => {
    const { backend } = recordingBackend();
    for (const shape of [[5, 96], [5, 8, 12]] as const) {
      const qkv = backend.tensor('bf16', shape);
      const { q, k, v } = backend.splitQkv(qkv, { numQoHeads: 4, numKvHeads: 2, headDim: 12 });
      expect([q.shape, k.shape, v.shape]).toEqual([[5, 4, 12], [5, 2, 12], [5, 2, 12]]);
      expect([layoutOf(q as unknown as OwnedTensor).offset, layoutOf(k as unknown as OwnedTensor).offset, layoutOf(v as unknown as OwnedTensor).offset]).toEqual([0, 48, 72]);
      expect(q.strides).toEqual([96, 12, 1]);
    }
    expect(thrown(() => backend.splitQkv(backend.tensor('f32', [5, 95]), { numQoHeads: 4, numKvHeads: 2, headDim: 12 })).code).toBe('KV029');
  });

  it('a view that overlaps a pool is refused as the pool itself is, and strided pools with KV048', () => {
    const { backend, calls } = recordingBackend();
    const store = backend.tensor('f32', [16, 2, 8]);
    const kPool = backend.view(store, [8, 2, 8]);
    const vPool = backend.view(store, [8, 2, 8], { offset: 128 });
    const q = backend.tensor('f32', [3, 4, 8]);
    const k = backend.view(store, [3, 2, 8], { offset: 120 });
    const v = backend.tensor('f32', [3, 2, 8]);
    const positions = backend.tensor('i32', [3], [0, 1, 2]);
    const slots = backend.tensor('i32', [3], [0, 1, 2]);
    const call = { q, k, v, positions, slots, headDim: 8, numQoHeads: 4, numKvHeads: 2, ropeBase: 10000 };
    expect(thrown(() => backend.ropePoolFused({ ...call, kPool, vPool })).code).toBe('KV039');
    const strided = backend.view(store, [8, 2, 8], { strides: [32, 8, 1] });
    expect(thrown(() => backend.ropePoolFused({ ...call, k: backend.tensor('f32', [3, 2, 8]), kPool: strided, vPool: backend.tensor('f32', [8, 2, 8]) })).code).toBe('KV048');
    expect(calls).toEqual([]);
    backend.ropePoolFused({ ...call, k: backend.tensor('f32', [3, 2, 8]), kPool, vPool });
    expect(calls.length).toBe(1);
  });
});
