import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forEverySeed } from '../../../propertySeeds.js';
import { defineBackend, firstLongerSegment, firstOffsetsBreak, offsetsRuleError, segmentsWithinError, TENSOR_OWNER } from '../src/backend/index.js';
import type { BackendKernels, DeviceSegmentCheck, OffsetsBreak, OwnedTensor } from '../src/backend/index.js';
import type { ContractError, DType, Shape } from '../src/index.js';
import { Call } from '../src/runtime/call.js';

/** Runs the offsets rule on host values: the error, or undefined. */
function hostOffsets(values: readonly number[], total: number): ContractError | undefined {
  const call = new Call('pagedAttention', { owner: {}, label: 'test', hostValues: () => values }, { dims: { N: total }, dtypes: {} });
  try {
    call.offsets('qIndptr', { shape: [values.length] } as unknown as OwnedTensor, 'N', 'KV078');
    return undefined;
  } catch (e) {
    return e as ContractError;
  }
}

/** What a device records for an offsets rule (entry, entry value · 4 + how) and the host decodes from that record alone. */
function deviceOffsets(values: readonly number[], total: number): ContractError | undefined {
  const call = new Call('pagedAttention', { owner: {}, label: 'test' }, { dims: { N: total }, dtypes: {} });
  call.offsets('qIndptr', { shape: [values.length] } as unknown as OwnedTensor, 'N', 'KV078');
  const check = call.deviceSegmentChecks[0] as Extract<DeviceSegmentCheck, { kind: 'offsets' }>;
  // A kernel's own loop: entry i compares itself with entry i - 1; the earliest entry wins.
  let record: { index: number; value: number } | undefined;
  const how: OffsetsBreak[] = ['start', 'decreasing', 'end'];
  for (let i = 0; i < values.length && !record; i++) {
    const broken = i === 0 ? (values[0] !== 0 ? 0 : -1) : values[i]! < values[i - 1]! ? 1 : -1;
    if (broken >= 0) record = { index: i, value: values[i]! * 4 + broken };
  }
  if (!record && values.length > 0 && values.at(-1) !== check.total) record = { index: values.length - 1, value: values.at(-1)! * 4 + 2 };
  if (!record) return undefined;
  const code = ((record.value % 4) + 4) % 4;
  return offsetsRuleError(check, record.index, (record.value - code) / 4, how[code]!, call.dims);
}

const described = (e: ContractError | undefined) => e && { code: e.code, message: e.message, details: e.details };

describe('offsets rules (indptr)', () => {
  it('the host check and a device record decoded give the same error for any values', async () => {
    await forEverySeed(200, (run) =>
      fc.assert(
        fc.property(fc.array(fc.integer({ min: -3, max: 12 }), { minLength: 1, maxLength: 8 }), fc.integer({ min: 0, max: 12 }), (values, total) => {
          expect(described(deviceOffsets(values, total))).toEqual(described(hostOffsets(values, total)));
        }),
        run,
      ),
    );
  });

  it('accepts exactly the prefix sums of non-negative lengths that end at the total', async () => {
    await forEverySeed(200, (run) =>
      fc.assert(
        fc.property(fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 6 }), (lengths) => {
          const offsets = [0];
          for (const n of lengths) offsets.push(offsets.at(-1)! + n);
          const total = offsets.at(-1)!;
          expect(firstOffsetsBreak(offsets, total)).toBeUndefined();
          expect(firstOffsetsBreak(offsets, total + 1)).toEqual({ index: offsets.length - 1, how: 'end' });
          if (lengths.some((n) => n > 0)) {
            const at = offsets.findIndex((x) => x > 0);
            const dropped = offsets.map((x, i) => (i === at ? -1 : x));
            expect(firstOffsetsBreak(dropped, total)).toEqual({ index: at, how: 'decreasing' });
          }
        }),
        run,
      ),
    );
  });

  it('names each way an indptr breaks in its message', () => {
    expect(hostOffsets([1, 2], 2)?.message).toMatch(/^\[KV078\] pagedAttention: qIndptr\[0\] = 1: offsets start at 0\. N=2\./);
    expect(hostOffsets([0, 3, 2], 2)?.message).toContain('qIndptr[2] = 2: it is below qIndptr[1]; offsets never decrease');
    expect(hostOffsets([0, 1, 2], 3)?.message).toContain('qIndptr[2] = 2: the last offset must be N = 3');
  });

  it('an indptr with no entry is refused from its shape, on the host and on a device alike', () => {
    for (const hostValues of [() => [], undefined]) {
      const call = new Call('pagedAttention', { owner: {}, label: 'test', hostValues }, { dims: { N: 0 }, dtypes: {} });
      expect(() => call.offsets('qIndptr', { shape: [0] } as unknown as OwnedTensor, 'N', 'KV078')).toThrow(/qIndptr\[0\] = nothing: an indptr holds B \+ 1 entries/);
      expect(call.deviceSegmentChecks).toEqual([]);
    }
  });

  it('segmentsWithin: the first request with more queries than cached tokens, with both lengths', () => {
    expect(firstLongerSegment([0, 1, 4, 6], [0, 1, 3, 9])).toEqual({ index: 1, length: 3, limit: 2 });
    expect(firstLongerSegment([0, 1, 3], [0, 1, 3])).toBeUndefined();
    const call = new Call('pagedAttention', { owner: {}, label: 'test' }, { dims: {}, dtypes: {} });
    call.segmentsWithin('qIndptr', {} as OwnedTensor, 'kvIndptr', {} as OwnedTensor, 'KV079');
    const check = call.deviceSegmentChecks[0]!;
    expect(check.kind).toBe('segmentsWithin');
    const e = segmentsWithinError(check as Extract<DeviceSegmentCheck, { kind: 'segmentsWithin' }>, 1, 3, 2, {});
    expect(e.message).toMatch(/^\[KV079\] pagedAttention: request 1 has 3 queries in qIndptr but 2 cached tokens in kvIndptr/);
  });
});

/** Kernels without the optional ops: tensors that hold their data, and nothing else. */
function kernelsWithout(): BackendKernels {
  const kernels: BackendKernels = {
    kind: 'cpu',
    label: 'bare backend',
    hostValues: (t) => (t as unknown as { data: number[] }).data,
    tensor(dtype: DType, shape: Shape, data) {
      return { dtype, shape, strides: shape.map((_, i) => shape.slice(i + 1).reduce((n, d) => n * d, 1)), backend: 'cpu', disposed: false, data: data ?? [], [TENSOR_OWNER]: kernels, dispose() {} } as unknown as OwnedTensor;
    },
    tensorFromBytes: (dtype, shape) => kernels.tensor(dtype, shape, undefined),
    view: (base) => base,
    read: async () => new Float32Array(),
    readBytes: async () => new ArrayBuffer(0),
    fusedNormRopeStacked: (args) => ({ kOut: args.kv, vOut: args.kv }),
    createKvMaterializer: () => ({ materialize() {}, materializeInto() {}, dispose() {} }),
    ropePoolFused: (args) => ({ qRot: args.q, kRot: args.k }),
    mlaPoolFused: (args) => (args.q ? { qRot: args.q } : {}),
    dequantizeKv() {},
    sync: async () => {},
    flush() {},
    dispose() {},
  };
  return kernels;
}

describe('ops a backend does not run yet', () => {
  it('are missing from backend.ops; a call is validated first, then refused saying so', () => {
    const backend = defineBackend(kernelsWithout());
    expect(backend.ops).not.toContain('pagedAttention');
    expect(backend.ops).not.toContain('copySlots');
    expect(backend.ops).toContain('ropePoolFused');
    const q = backend.tensor('f32', [1, 2, 8]);
    const pool = () => backend.tensor('f32', [4, 1, 8]);
    const index = (values: number[]) => backend.tensor('i32', [values.length], values);
    const args = { q, kPool: pool(), vPool: pool(), qIndptr: index([0, 1]), kvIndptr: index([0, 2]), kvSlots: index([0, 3]), numQoHeads: 2, numKvHeads: 1, headDim: 8 };
    expect(() => backend.pagedAttention(args)).toThrow(/pagedAttention is not available on bare backend yet/);
    expect(() => backend.pagedAttention({ ...args, kvSlots: index([0, 4]) })).toThrow(expect.objectContaining({ code: 'KV080' }));
  });

  it('prepare of such an op validates, then rejects as the call throws', async () => {
    const backend = defineBackend(kernelsWithout());
    const pool = () => backend.tensor('f32', [4, 1, 8]);
    const index = (values: number[]) => backend.tensor('i32', [values.length], values);
    const args = { q: backend.tensor('f32', [1, 2, 8]), kPool: pool(), vPool: pool(), qIndptr: index([0, 1]), kvIndptr: index([0, 2]), kvSlots: index([0, 3]), numQoHeads: 2, numKvHeads: 1, headDim: 8 };
    await expect(backend.prepare('pagedAttention', args)).rejects.toThrow(/pagedAttention is not available on bare backend yet/);
    await expect(backend.prepare('pagedAttention', { ...args, kvSlots: index([0, 4]) })).rejects.toMatchObject({ code: 'KV080' });
    const copy = { kSrc: pool(), vSrc: pool(), kDst: pool(), vDst: pool(), fromSlots: index([0]), toSlots: index([1]) };
    await expect(backend.prepare('copySlots', copy)).rejects.toThrow(/copySlots is not available on bare backend yet/);
    await expect(backend.prepare('copySlots', { ...copy, toSlots: index([1, 2]) })).rejects.toMatchObject({ code: 'KV083' });
  });
});
