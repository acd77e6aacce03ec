import type { FloatDType, IndexDType } from '@kvkit/contracts';
import type { CreateKvMaterializerChecked, KvMaterializerMaterializeChecked, KvMaterializerMaterializeIntoChecked, MaterializerKernels } from '@kvkit/contracts/backend';
import { deliverLayerViews } from '@kvkit/contracts/backend';
import { ContractError } from '@kvkit/contracts';
import { align } from '../runtime/gpuRuntime.js';
import type { BufferRange, DeviceStorage } from '../runtime/gpuRuntime.js';
import { bytesPerElement, GpuTensor } from '../runtime/gpuTensor.js';
import type { WebGpuKernels } from '../runtime/webGpuKernels.js';
import type { RopeSource } from '../shaders/plan.js';
import { launchGemm, launchNormRope, launchRopeTable } from './launch.js';
import { turnsBuffer } from './ropePoolFused.js';

/** Layer views must start where a binding may start. */
const VIEW_ALIGN = 256;

export function createKvMaterializer(k: WebGpuKernels, args: CreateKvMaterializerChecked): MaterializerKernels {
  return new WgslKvMaterializer(k, args);
}

/** One reusable buffer whose capacity, counted in tokens, grows by doubling. */
interface Workspace {
  storage: DeviceStorage | undefined;
  tokens: number;
}

/**
 * Holds device copies of the weights (the caller may dispose its tensors),
 * kNormWeight and eps together in one buffer (eps as f32 words after the
 * weights), the cos/sin cache or the RoPE frequencies, and workspaces kept
 * between calls: the projection [T, L*2*H*D], and K and V as [L, T, H, D]
 * with each layer padded to 256 bytes so its view binds on its own.
 */
class WgslKvMaterializer implements MaterializerKernels {
  readonly #k: WebGpuKernels;
  readonly #dtype: FloatDType;
  readonly #L: number;
  readonly #H: number;
  readonly #D: number;
  readonly #R: number;
  readonly #hidden: number;
  readonly #ropeStyle: 'neox' | 'gptj';
  readonly #weightType: FloatDType;
  readonly #cacheType: FloatDType;
  readonly #ropeSource: RopeSource;
  /** Rows of the cache; undefined with ropeBase (positions then need only be >= 0). */
  readonly #cacheRows: number | undefined;
  readonly #kvWeight: DeviceStorage;
  readonly #normWeights: DeviceStorage;
  readonly #epsWordOffset: number;
  readonly #cosSin: DeviceStorage | undefined;
  readonly #turns: BufferRange | undefined;
  readonly #proj: Workspace = { storage: undefined, tokens: 0 };
  readonly #kOut: Workspace = { storage: undefined, tokens: 0 };
  readonly #vOut: Workspace = { storage: undefined, tokens: 0 };
  readonly #table: Workspace = { storage: undefined, tokens: 0 };
  /** True while writeLayerKv runs: a nested call then works in fresh buffers instead of overwriting the views. */
  #busy = false;
  #disposed = false;

  constructor(k: WebGpuKernels, args: CreateKvMaterializerChecked) {
    this.#k = k;
    const { L, H, D, R, hidden } = args.dims;
    [this.#L, this.#H, this.#D, this.#R, this.#hidden] = [L, H, D, R, hidden];
    this.#dtype = args.kvWeight.dtype as FloatDType;
    this.#ropeStyle = args.ropeStyle;
    const op = 'createKvMaterializer';
    const runtime = k.runtime;

    const kvWeight = k.own(args.kvWeight);
    this.#kvWeight = k.storage(kvWeight.byteLength, 'kvkit kvWeight', op);
    runtime.copy(kvWeight.storage.buffer, kvWeight.byteOffset, this.#kvWeight.buffer, 0, align(kvWeight.byteLength, 4));

    const normWeight = k.own(args.kNormWeight);
    this.#weightType = normWeight.dtype as FloatDType;
    const weightBytes = align(normWeight.byteLength, 4);
    this.#epsWordOffset = weightBytes / 4;
    const epsNumber = typeof args.eps === 'number' ? args.eps : undefined;
    this.#normWeights = k.storage(weightBytes + L * 4, 'kvkit kNormWeight and eps', op, undefined, epsNumber !== undefined);
    if (epsNumber !== undefined) {
      new Float32Array(this.#normWeights.buffer.getMappedRange(), weightBytes, L).fill(epsNumber); // rounded to f32, as an eps tensor holds it
      this.#normWeights.buffer.unmap();
    } else {
      const eps = k.own(args.eps as GpuTensor);
      runtime.copy(eps.storage.buffer, eps.byteOffset, this.#normWeights.buffer, weightBytes, L * 4);
    }
    runtime.copy(normWeight.storage.buffer, normWeight.byteOffset, this.#normWeights.buffer, 0, weightBytes);

    if (args.cosSinCache) {
      const cache = k.own(args.cosSinCache);
      this.#cacheType = cache.dtype as FloatDType;
      this.#cacheRows = cache.shape[0]!;
      this.#cosSin = k.storage(cache.byteLength, 'kvkit cos/sin cache', op);
      runtime.copy(cache.storage.buffer, cache.byteOffset, this.#cosSin.buffer, 0, align(cache.byteLength, 4));
      this.#ropeSource = 'cache';
    } else {
      // With ropeBase, cos/sin are computed on the device per call: no host look at positions, nothing to grow.
      this.#cacheType = 'f32';
      this.#ropeSource = 'tokenTable';
      this.#turns = turnsBuffer(k, args.ropeBase!, R).range(0, (R / 2) * 4);
    }
  }

  materialize(args: KvMaterializerMaterializeChecked): void {
    const op = 'KvMaterializer.materialize';
    this.#checkLive(op);
    const { T } = args.dims;
    if (T === 0) return;
    const [L, H, D] = [this.#L, this.#H, this.#D];
    const nested = this.#busy;
    const fresh: DeviceStorage[] = [];
    const layerBytes = align(T * H * D * bytesPerElement(this.#dtype), VIEW_ALIGN);
    const kOut = this.#workspace(this.#kOut, T, layerBytes * L, nested, fresh, op);
    const vOut = this.#workspace(this.#vOut, T, layerBytes * L, nested, fresh, op);
    try {
      this.#run(args, { kDst: kOut.range(0, layerBytes * L), vDst: vOut.range(0, layerBytes * L) }, layerBytes, undefined, nested, fresh, op);
      const shape = Object.freeze([T, H, D]);
      this.#busy = true;
      try {
        deliverLayerViews(L, args.writeLayerKv, (l) => [
          new GpuTensor(this.#k, this.#dtype, shape, kOut, l * layerBytes, { layer: l, ownsStorage: false }),
          new GpuTensor(this.#k, this.#dtype, shape, vOut, l * layerBytes, { layer: l, ownsStorage: false }),
        ]);
      } finally {
        this.#busy = nested;
      }
    } finally {
      for (const s of fresh) s.release();
    }
  }

  materializeInto(args: KvMaterializerMaterializeIntoChecked): void {
    const op = 'KvMaterializer.materializeInto';
    this.#checkLive(op);
    const { T, S } = args.dims;
    if (T === 0) return;
    const fresh: DeviceStorage[] = [];
    try {
      const poolLayerBytes = S * this.#H * this.#D * bytesPerElement(this.#dtype);
      this.#run(args, { kDst: this.#k.own(args.kPool).range, vDst: this.#k.own(args.vPool).range }, poolLayerBytes, this.#k.own(args.slots), this.#busy, fresh, op);
    } finally {
      for (const s of fresh) s.release();
    }
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#kvWeight.release();
    this.#normWeights.release();
    this.#cosSin?.release();
    for (const w of [this.#proj, this.#kOut, this.#vOut, this.#table]) {
      w.storage?.release();
      w.storage = undefined;
      w.tokens = 0;
    }
  }

  #checkLive(op: string): void {
    this.#k.assertLive(op);
    if (this.#disposed || this.#k.disposed) throw new ContractError('KV003', op, { arg: 'this KvMaterializer' });
  }

  /** The projection GEMM, the cos/sin table (ropeBase), then norm + RoPE into the destinations. */
  #run(
    args: KvMaterializerMaterializeChecked | KvMaterializerMaterializeIntoChecked,
    dst: { kDst: BufferRange; vDst: BufferRange },
    destLayerBytes: number,
    slots: GpuTensor | undefined,
    nested: boolean,
    fresh: DeviceStorage[],
    op: string,
  ): void {
    const k = this.#k;
    const { T } = args.dims;
    const [L, H, D, R] = [this.#L, this.#H, this.#D, this.#R];
    const N = L * 2 * H * D;
    const projBytes = T * N * bytesPerElement(this.#dtype);
    const proj = this.#workspace(this.#proj, T, projBytes, nested, fresh, op).range(0, projBytes);
    const ctxHidden = k.own(args.ctxHidden);
    launchGemm(k, this.#dtype, { a: ctxHidden.range, w: this.#kvWeight.range(0, this.#kvWeight.byteLength), c: proj }, { M: T, N, K: this.#hidden });

    const positions = k.own(args.positions);
    let cosSin: BufferRange;
    if (this.#ropeSource === 'tokenTable') {
      cosSin = this.#workspace(this.#table, T, T * R * 4, nested, fresh, op).range(0, T * R * 4);
      launchRopeTable(k, positions.dtype as IndexDType, { positions: positions.range, turnsPerPosition: this.#turns!, table: cosSin }, T, R);
    } else {
      cosSin = this.#cosSin!.range(0, this.#cosSin!.byteLength);
    }

    const rules = [args.deviceChecks.find((c) => c.arg === 'positions'), ...(slots ? [args.deviceChecks.find((c) => c.arg === 'slots')] : [])];
    const { flags, words } = k.checks.reserve(rules, args.dims);
    launchNormRope(
      k,
      {
        kvType: this.#dtype,
        weightType: this.#weightType,
        cacheType: this.#cacheType,
        positionType: positions.dtype as IndexDType,
        slotType: slots?.dtype as IndexDType | undefined,
        D,
        R,
        style: this.#ropeStyle,
        ropeSource: this.#ropeSource,
        epsInWeights: true,
      },
      {
        kv: proj,
        weights: this.#normWeights.range(0, this.#normWeights.byteLength),
        cosSin,
        positions: positions.range,
        ...(slots ? { slots: slots.range } : {}),
        ...dst,
        flags,
      },
      {
        tokens: T,
        layers: L,
        heads: H,
        positionBelow: this.#cacheRows ?? 2 ** 31,
        slotBelow: args.dims.S ?? 0,
        destLayerBytes,
        flagWords: words,
        epsWordOffset: this.#epsWordOffset,
      },
    );
  }

  /** A buffer for `tokens` tokens of `bytes`: the kept one (grown by doubling), or a fresh one for a nested call. */
  #workspace(w: Workspace, tokens: number, bytes: number, nested: boolean, fresh: DeviceStorage[], op: string): DeviceStorage {
    if (nested) {
      const s = this.#k.storage(bytes, 'kvkit materializer workspace', op);
      fresh.push(s);
      return s;
    }
    if (w.storage === undefined || w.tokens < tokens || w.storage.byteLength < bytes) {
      const grownTokens = Math.max(tokens, 2 * w.tokens);
      w.storage?.release();
      w.storage = this.#k.storage(Math.ceil((bytes * grownTokens) / tokens), 'kvkit materializer workspace', op);
      w.tokens = grownTokens;
    }
    return w.storage;
  }
}
