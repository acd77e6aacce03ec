/**
 * kvkit's batch and the application's own queue. After flush(), a submit of
 * the application's runs after every op called before it, so its copy of an
 * output sees the op's results and its writes to an input do not reach the
 * op. Without flush(), a call that touches a buffer the application can reach
 * (wrapped, or handed out by gpuBufferOf) has submitted its work before it
 * returns; kvkit's own tensors keep batching. With `batching: 'explicit'`
 * nothing goes before flush(), read() or sync(): the application's submit
 * then overtakes kvkit's work, and flush() is what orders them.
 */
import { isContractError } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { describe, expect, it } from 'vitest';
import { createWebGpuBackend, gpuBufferOf, webGpuBackendStats } from '../src/index.js';
import type { WebGpuBackend, WebGpuBatching } from '../src/index.js';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';
import type { Backend } from '@kvkit/contracts';
import { applicationBuffer, applicationCopy, ownDevice, random, ropeArgs } from './applicationSide.js';

const found = await findAdapter({}, KERNEL_TOGGLES);
const why = found.ok ? '' : ' (skipped: no WebGPU adapter)';

const [T, L, H, D, R, P] = [5, 3, 2, 6, 4, 9];

/** fusedNormRopeStacked arguments on random data; `kv` is f32 so the application can overwrite it with its own words. */
function normRopeArgs(b: Backend, seed: number) {
  return {
    kv: b.tensor('f32', [T, L, 2 * H * D], random(T * L * 2 * H * D, seed)),
    kNormWeight: b.tensor('f32', [L, D], random(L * D, seed + 1)),
    eps: b.tensor('f32', [L], [1e-6, 1e-5, 1e-4]),
    cosSinCache: b.tensor('f32', [P, R], random(P * R, seed + 2)),
    positions: b.tensor('i32', [T], [3, 0, 8, 3, 5]),
    numKvHeads: H,
    headDim: D,
    rotaryDim: R,
  };
}

/** The application's own copy of `bytes` at `offset` of `buffer`, submitted by it, then mapped, as f32. */
async function copiedFloats(device: GPUDevice, buffer: GPUBuffer, offset: number, bytes: number): Promise<Float32Array> {
  return new Float32Array((await applicationCopy(device, buffer, offset, bytes).words()).buffer);
}

const submits = (b: Backend) => webGpuBackendStats(b).submits;
const bitsOf = (values: Float32Array) => Array.from(new Uint32Array(values.buffer, values.byteOffset, values.length));

describe.skipIf(!found.ok)(`flush() and the application's own submits${why}`, () => {
  it("an application's copy of kOut submitted right after flush() reads the op's results", async () => {
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device });
    const args = normRopeArgs(b, 11);
    const { kOut, vOut } = b.fusedNormRopeStacked(args);
    b.flush();
    const out = gpuBufferOf(kOut);
    expect(out.byteLength).toBe(L * T * H * D * 4);
    expect(out.strides).toEqual([T * H * D, H * D, D, 1]);
    const copied = await copiedFloats(device, out.buffer, out.byteOffset, out.byteLength);
    expect(copied.some((x) => x !== 0)).toBe(true);
    expect(Array.from(copied)).toEqual(Array.from((await b.read(kOut)) as Float32Array));
    // V is K's neighbour in kv and is copied bit for bit: the application sees it as written.
    const vRange = gpuBufferOf(vOut);
    const v = await copiedFloats(device, vRange.buffer, vRange.byteOffset, vRange.byteLength);
    const kv = random(T * L * 2 * H * D, 11);
    for (const [l, t, h, d] of [[0, 0, 0, 0], [2, 4, 1, 5], [1, 3, 0, 2]] as const) {
      expect(v[((l * T + t) * H + h) * D + d]).toBe(kv[(t * L + l) * 2 * H * D + (H + h) * D + d]);
    }
    await b.sync();
    b.dispose();
    device.destroy();
  });

  it('writing kv with queue.writeBuffer after the call and flush() leaves the result that of the kv the call saw', async () => {
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device });
    const cpu = createCpuBackend();
    const args = normRopeArgs(b, 21);
    const before = (await b.read(b.fusedNormRopeStacked(args).kOut)) as Float32Array;
    const { kOut } = b.fusedNormRopeStacked(args);
    b.flush();
    const kv = gpuBufferOf(args.kv);
    const other = random(T * L * 2 * H * D, 99);
    device.queue.writeBuffer(kv.buffer, kv.byteOffset, other);
    expect(Array.from((await b.read(kOut)) as Float32Array)).toEqual(Array.from(before));
    // And the write did land: the next call sees the new kv, as the CPU reference computes it.
    const after = (await b.read(b.fusedNormRopeStacked(args).kOut)) as Float32Array;
    const reference = (await cpu.read(cpu.fusedNormRopeStacked({ ...normRopeArgs(cpu, 21), kv: cpu.tensor('f32', [T, L, 2 * H * D], other) }).kOut)) as Float32Array;
    for (let i = 0; i < reference.length; i++) expect(after[i]).toBeCloseTo(reference[i]!, 4);
    expect(Array.from(after)).not.toEqual(Array.from(before));
    await b.sync();
    b.dispose();
    cpu.dispose();
    device.destroy();
  });

  it('submits once for the ops called since the last submit, and nothing when none was', async () => {
    const b = await createWebGpuBackend();
    const args = normRopeArgs(b, 31);
    b.flush();
    const idle = webGpuBackendStats(b).submits;
    b.flush();
    expect(webGpuBackendStats(b).submits).toBe(idle);
    for (let i = 0; i < 7; i++) b.fusedNormRopeStacked(args);
    b.flush();
    expect(webGpuBackendStats(b).submits).toBe(idle + 1);
    await b.sync();
    b.dispose();
    expect(() => b.flush()).toThrow(expect.objectContaining({ code: 'KV003', op: 'flush' }));
  });
});

describe.skipIf(!found.ok)(`gpuBufferOf${why}`, () => {
  it("is refused with a code for what is not a live WebGPU tensor: KV001, KV002 (another backend's), KV003", async () => {
    const b = await createWebGpuBackend();
    const cpu = createCpuBackend();
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return isContractError(e) ? `${e.code} ${e.op}` : String(e);
      }
      return 'no error';
    };
    expect(code(() => gpuBufferOf({} as never))).toBe('KV001 gpuBufferOf');
    expect(code(() => gpuBufferOf(cpu.tensor('f32', [2], [1, 2])))).toBe('KV002 gpuBufferOf');
    const t = b.tensor('bf16', [3, 5], random(15, 41));
    expect(gpuBufferOf(t)).toMatchObject({ byteOffset: 0, byteLength: 30, strides: [5, 1] });
    t.dispose();
    expect(code(() => gpuBufferOf(t))).toBe('KV003 gpuBufferOf');
    b.dispose();
    cpu.dispose();
  });
});

/** ropeArgs' pools as the application's buffers (initial contents `kInitial`, `vInitial`), wrapped. */
function applicationPools(b: WebGpuBackend, device: GPUDevice, seed: number) {
  const args = ropeArgs(b, seed);
  const [S, H, D] = args.kPool.shape as [number, number, number];
  const kInitial = random(S * H * D, seed + 10);
  const vInitial = random(S * H * D, seed + 11);
  const kBuffer = applicationBuffer(device, kInitial);
  const vBuffer = applicationBuffer(device, vInitial);
  const pools = { kPool: b.wrap(kBuffer, 'f32', [S, H, D]), vPool: b.wrap(vBuffer, 'f32', [S, H, D]) };
  return { args: { ...args, ...pools }, kBuffer, vBuffer, kInitial, vInitial, rowWords: H * D, poolBytes: S * H * D * 4 };
}

describe.skipIf(!found.ok)(`the application's own submits without flush()${why}`, () => {
  it("ropePoolFused into the application's pools, then its own copy of them with no flush(): the copy holds the rows written", async () => {
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device });
    try {
      const { args, kBuffer, vBuffer, kInitial, vInitial, rowWords, poolBytes } = applicationPools(b, device, 7);
      const before = submits(b);
      const { kRot } = b.ropePoolFused(args);
      expect(submits(b)).toBe(before + 1);
      const [k, v] = await Promise.all([kBuffer, vBuffer].map((buffer) => applicationCopy(device, buffer, 0, poolBytes).words()));
      const rotated = bitsOf((await b.read(kRot)) as Float32Array);
      const values = bitsOf(random(5 * rowWords, 7 + 2)); // ropeArgs' v
      const row = (words: readonly number[] | Uint32Array, i: number) => Array.from(words.slice(i * rowWords, (i + 1) * rowWords));
      // slots [2, 0, 2, 3, -1]: slot 2 holds token 2's rows (the last that names it); slot 1 keeps what it held.
      for (const [slot, token] of [[0, 1], [2, 2], [3, 3]] as const) {
        expect(row(k!, slot)).toEqual(row(rotated, token));
        expect(row(v!, slot)).toEqual(row(values, token));
      }
      expect(row(k!, 1)).toEqual(row(bitsOf(kInitial), 1));
      expect(row(v!, 1)).toEqual(row(bitsOf(vInitial), 1));
      await b.sync();
    } finally {
      b.dispose();
      device.destroy();
    }
  });

  /**
   * An engine's decode loop: each step its own queue writes the token's fused
   * projection, position and slot into its buffers, kvkit writes the token
   * into its caches, and its own submit copies the token's cache rows out at
   * once (its attention would read them there). The wrong steps: a K row not
   * the CPU reference's for that projection, or a V row not its bits.
   */
  async function decodeLoop(batching: WebGpuBatching, flushEachStep: boolean): Promise<{ wrong: number[]; submits: number }> {
    const [STEPS, Hq, H, D] = [40, 4, 2, 8];
    const width = (Hq + 2 * H) * D;
    const rowBytes = H * D * 4;
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device, batching });
    const cpu = createCpuBackend();
    try {
      const qkvBuffer = applicationBuffer(device, new Float32Array(width));
      const positionBuffer = applicationBuffer(device, new Int32Array(1));
      const slotBuffer = applicationBuffer(device, new Int32Array(1));
      const [kCache, vCache] = [0, 1].map((i) => applicationBuffer(device, random(STEPS * H * D, 50 + i)));
      const heads = { numQoHeads: Hq, numKvHeads: H, headDim: D };
      const step = { ...b.splitQkv(b.wrap(qkvBuffer, 'f32', [1, width]), heads), positions: b.wrap(positionBuffer, 'i32', [1]), slots: b.wrap(slotBuffer, 'i32', [1]) };
      const pools = { kPool: b.wrap(kCache!, 'f32', [STEPS, H, D]), vPool: b.wrap(vCache!, 'f32', [STEPS, H, D]) };
      const before = submits(b);
      const copies = [];
      const projections: Float32Array[] = [];
      for (let t = 0; t < STEPS; t++) {
        const slot = (7 * t) % STEPS;
        const projection = random(width, 1000 + t);
        projections.push(projection);
        device.queue.writeBuffer(qkvBuffer, 0, projection);
        device.queue.writeBuffer(positionBuffer, 0, Int32Array.of(3 * t + 1));
        device.queue.writeBuffer(slotBuffer, 0, Int32Array.of(slot));
        b.ropePoolFused({ ...step, ...pools, ...heads, ropeBase: 10000 }).qRot.dispose();
        if (flushEachStep) b.flush();
        copies.push([kCache!, vCache!].map((cache) => applicationCopy(device, cache, slot * rowBytes, rowBytes)));
      }
      const submitted = submits(b) - before;
      const wrong: number[] = [];
      for (let t = 0; t < STEPS; t++) {
        const [k, v] = await Promise.all(copies[t]!.map((c) => c.words()));
        const projection = cpu.splitQkv(cpu.tensor('f32', [1, width], projections[t]!), heads);
        const positions = cpu.tensor('i32', [1], [3 * t + 1]);
        const pool = () => cpu.empty('f32', [1, H, D]);
        const { kRot } = cpu.ropePoolFused({ ...projection, positions, slots: cpu.tensor('i32', [1], [0]), kPool: pool(), vPool: pool(), ...heads, ropeBase: 10000 });
        const expectedK = (await cpu.read(kRot)) as Float32Array;
        const gotK = new Float32Array(k!.buffer);
        const kRight = expectedK.every((x, i) => Math.abs(gotK[i]! - x) <= 1e-5 * Math.max(1, Math.abs(x)));
        const vRight = bitsOf(projections[t]!.subarray((Hq + H) * D)).every((w, i) => v![i] === w);
        if (!kRight || !vRight) wrong.push(t);
      }
      await b.sync();
      return { wrong, submits: submitted };
    } finally {
      b.dispose();
      cpu.dispose();
      device.destroy();
    }
  }

  it("a decode loop of 40 steps on the application's buffers, its submits never preceded by flush(): every token's K and V rows, one submit a step", async () => {
    const loop = await decodeLoop('auto', false);
    expect(loop.wrong).toEqual([]);
    expect(loop.submits).toBe(40);
  });

  it("with batching: 'explicit', the same loop needs flush() before the application's submits: without it they overtake kvkit's work", async () => {
    const unflushed = await decodeLoop('explicit', false);
    expect(unflushed.submits).toBe(0);
    expect(unflushed.wrong.length).toBeGreaterThan(0);
    const flushed = await decodeLoop('explicit', true);
    expect(flushed.wrong).toEqual([]);
    expect(flushed.submits).toBe(40);
  });

  it("batches calls on the application's buffers into one submit with batching: 'explicit', submits each by default", async () => {
    for (const [batching, perCall] of [['explicit', 0], ['auto', 1]] as const) {
      const device = await ownDevice();
      const b = await createWebGpuBackend({ device, batching });
      try {
        const { args } = applicationPools(b, device, 17);
        b.flush();
        const before = submits(b);
        for (let i = 0; i < 7; i++) b.ropePoolFused(args);
        expect(submits(b) - before).toBe(7 * perCall);
        b.flush();
        expect(submits(b) - before).toBe(batching === 'explicit' ? 1 : 7);
        await b.sync();
      } finally {
        b.dispose();
        device.destroy();
      }
    }
  });

  it('gpuBufferOf submits the work pending on the buffer it hands out, and later calls on that buffer submit before they return, until the tensor is disposed', async () => {
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device });
    try {
      const args = ropeArgs(b, 27);
      b.flush();
      const before = submits(b);
      const first = b.ropePoolFused(args);
      expect(submits(b)).toBe(before);
      // Nothing pending on an untouched tensor: nothing to submit.
      gpuBufferOf(b.tensor('f32', [4], [1, 2, 3, 4]));
      expect(submits(b)).toBe(before);
      const pool = gpuBufferOf(args.kPool);
      expect(submits(b)).toBe(before + 1);
      const copied = await copiedFloats(device, pool.buffer, pool.byteOffset, pool.byteLength);
      expect(bitsOf(copied)).toEqual(bitsOf((await b.read(args.kPool)) as Float32Array));
      const at = submits(b);
      b.ropePoolFused(args);
      expect(submits(b)).toBe(at + 1);
      // qRot handed out, then disposed: its buffer is kvkit's alone again, recycled or not.
      gpuBufferOf(first.qRot);
      first.qRot.dispose();
      first.kRot.dispose();
      const owned = { ...args, kPool: b.tensor('f32', args.kPool.shape, random(72, 28)) };
      const after = submits(b);
      for (let i = 0; i < 3; i++) b.ropePoolFused(owned);
      expect(submits(b)).toBe(after);
      await b.sync();
    } finally {
      b.dispose();
      device.destroy();
    }
  });

  it("inside writeLayerKv, the application's own copy of a layer's K from gpuBufferOf holds the layer as written", async () => {
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device });
    try {
      const [L, H, D, hidden, T] = [2, 2, 4, 5, 3];
      const m = b.createKvMaterializer({ kvWeight: b.tensor('f32', [L, 2 * H * D, hidden], random(L * 2 * H * D * hidden, 2)), kNormWeight: b.tensor('f32', [L, D], random(L * D, 3)), eps: 1e-6, numKvHeads: H, headDim: D, ropeBase: 10000 });
      const copies: { words(): Promise<Uint32Array> }[] = [];
      const reads: Promise<unknown>[] = [];
      m.materialize({
        ctxHidden: b.tensor('f32', [T, hidden], random(T * hidden, 4)),
        positions: b.tensor('i32', [T], [4, 0, 9]),
        writeLayerKv: (_layer, k) => {
          const range = gpuBufferOf(k);
          copies.push(applicationCopy(device, range.buffer, range.byteOffset, range.byteLength));
          reads.push(b.read(k));
        },
      });
      expect(copies).toHaveLength(L);
      for (let l = 0; l < L; l++) {
        const read = (await reads[l]) as Float32Array;
        expect(read.some((x) => x !== 0)).toBe(true);
        expect(Array.from(await copies[l]!.words())).toEqual(bitsOf(read));
      }
      m.dispose();
      await b.sync();
    } finally {
      b.dispose();
      device.destroy();
    }
  });

  it("with batching: 'explicit', gpuBufferOf submits nothing: flush() does", async () => {
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device, batching: 'explicit' });
    try {
      const args = ropeArgs(b, 37);
      b.flush();
      const before = submits(b);
      b.ropePoolFused(args);
      const pool = gpuBufferOf(args.kPool);
      b.ropePoolFused(args);
      expect(submits(b)).toBe(before);
      b.flush();
      expect(submits(b)).toBe(before + 1);
      const copied = await copiedFloats(device, pool.buffer, pool.byteOffset, pool.byteLength);
      expect(bitsOf(copied)).toEqual(bitsOf((await b.read(args.kPool)) as Float32Array));
      await b.sync();
    } finally {
      b.dispose();
      device.destroy();
    }
  });
});
