import type { FloatDType, IndexDType } from '@kvkit/contracts';
import type { CreateKvMaterializerChecked, KvMaterializerMaterializeChecked, KvMaterializerMaterializeIntoChecked, MaterializerKernels } from '@kvkit/contracts/backend';
import { OpLifecycle, Workspace } from '@kvkit/contracts/backend';
import type { DeviceCheck, OpCall } from '@kvkit/contracts/backend';
import type { DuplicateRule } from '@kvkit/contracts/backend';
import { align } from '../runtime/gpuRuntime.js';
import type { CallFlags } from '../runtime/deviceChecks.js';
import type { BufferRange, DeviceStorage } from '../runtime/gpuRuntime.js';
import { bytesPerElement, GpuTensor } from '../runtime/gpuTensor.js';
import type { WebGpuKernels } from '../runtime/webGpuKernels.js';
import type { PoolFormat } from '../shaders/kvPoolRows.wgsl.js';
import type { RopeSource } from '../shaders/plan.js';
import { storePoolRows } from './kvPools.js';
import { launchGemm, launchNormRope, launchRopeTable } from './launch.js';
import { poolWrites, rowKernelsWrite } from './poolWrites.js';
import type { PoolWriteParams } from './poolWrites.js';
import { angleTableRange } from './ropePoolFused.js';

/** Layer views must start where a binding may start. */
const VIEW_ALIGN = 256;

export function createKvMaterializer(k: WebGpuKernels, args: CreateKvMaterializerChecked): MaterializerKernels {
  return new WgslKvMaterializer(k, args);
}

/**
 * Holds device copies of the weights (the caller may dispose its tensors),
 * kNormWeight and eps together in one buffer (eps as f32 words after the
 * weights, then room for one call's fp8 scales, [H] each), the cos/sin cache
 * or the RoPE angle table, and workspaces kept between calls: the projection
 * [T, L*2*H*D], and K and V as [L, T, H, D] with each layer padded to 256
 * bytes so its view binds on its own.
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
  readonly #kvWeight: DeviceStorage;
  readonly #normWeights: DeviceStorage;
  readonly #epsWordOffset: number;
  /** Where a materializeInto into fp8 pools copies its kScale and vScale, in words of the weights buffer. */
  readonly #scaleWordOffset: number;
  /** The eps rule of an eps tensor, checked by every call's kernel on this materializer's copy (a number was checked at creation). */
  readonly #epsCheck: DeviceCheck | undefined;
  readonly #cosSin: DeviceStorage | undefined;
  readonly #angleTable: BufferRange | undefined;
  /** Workspaces in tokens: the projection, K and V (layers padded), and the ropeBase cos/sin rows. */
  readonly #proj: Workspace<DeviceStorage>;
  readonly #kOut: Workspace<DeviceStorage>;
  readonly #vOut: Workspace<DeviceStorage>;
  readonly #table: Workspace<DeviceStorage>;
  readonly #life: OpLifecycle;

  constructor(k: WebGpuKernels, args: CreateKvMaterializerChecked) {
    this.#k = k;
    const { L, H, D, R, hidden } = args.dims;
    [this.#L, this.#H, this.#D, this.#R, this.#hidden] = [L, H, D, R, hidden];
    this.#dtype = args.kvWeight.dtype as FloatDType;
    this.#ropeStyle = args.ropeStyle;
    const op = 'createKvMaterializer';
    const runtime = k.runtime;
    const workspace = (bytesFor: (tokens: number) => number) =>
      new Workspace<DeviceStorage>({ allocate: (tokens, callOp) => k.storage(bytesFor(tokens), 'kvkit materializer workspace', callOp), release: (s) => s.release() });
    const elementBytes = bytesPerElement(this.#dtype);
    this.#proj = workspace((tokens) => tokens * L * 2 * H * D * elementBytes);
    this.#kOut = workspace((tokens) => layerBytes(tokens, H * D * elementBytes) * L);
    this.#vOut = workspace((tokens) => layerBytes(tokens, H * D * elementBytes) * L);
    this.#table = workspace((tokens) => tokens * R * 4);
    this.#life = new OpLifecycle('this KvMaterializer', k);

    const kvWeight = k.own(args.kvWeight);
    this.#kvWeight = k.storage(kvWeight.byteLength, 'kvkit kvWeight', op);
    runtime.copy(kvWeight.storage.buffer, kvWeight.byteOffset, this.#kvWeight.buffer, 0, align(kvWeight.byteLength, 4));

    const normWeight = k.own(args.kNormWeight);
    this.#weightType = normWeight.dtype as FloatDType;
    const weightBytes = align(normWeight.byteLength, 4);
    this.#epsWordOffset = weightBytes / 4;
    this.#scaleWordOffset = weightBytes / 4 + L;
    const epsNumber = typeof args.eps === 'number' ? args.eps : undefined;
    this.#normWeights = k.storage(weightBytes + (L + 2 * H) * 4, 'kvkit kNormWeight, eps and scales', op, undefined, epsNumber !== undefined);
    if (epsNumber !== undefined) {
      new Float32Array(this.#normWeights.buffer.getMappedRange(), weightBytes, L).fill(epsNumber); // rounded to f32, as an eps tensor holds it
      this.#normWeights.buffer.unmap();
    } else {
      const eps = k.own(args.eps as GpuTensor);
      runtime.copy(eps.storage.buffer, eps.byteOffset, this.#normWeights.buffer, weightBytes, L * 4);
    }
    runtime.copy(normWeight.storage.buffer, normWeight.byteOffset, this.#normWeights.buffer, 0, weightBytes);
    const epsRule = args.deviceChecks.find((c) => c.arg === 'eps');
    this.#epsCheck = epsRule && { ...epsRule, tensor: new GpuTensor(k, 'f32', Object.freeze([L]), this.#normWeights, weightBytes, { ownsStorage: false }) };

    if (args.cosSinCache) {
      const cache = k.own(args.cosSinCache);
      this.#cacheType = cache.dtype as FloatDType;
      this.#cosSin = k.storage(cache.byteLength, 'kvkit cos/sin cache', op);
      runtime.copy(cache.storage.buffer, cache.byteOffset, this.#cosSin.buffer, 0, align(cache.byteLength, 4));
      this.#ropeSource = 'cache';
    } else {
      // With ropeBase, cos/sin are computed on the device per call: no host look at positions, nothing to grow.
      this.#cacheType = 'f32';
      this.#ropeSource = 'tokenTable';
      this.#angleTable = angleTableRange(k, { ropeBase: args.ropeBase!, rotaryDim: R, ropeScaling: args.ropeScaling, angles: args.angles });
    }
  }

  materialize(args: KvMaterializerMaterializeChecked): void {
    const op = 'KvMaterializer.materialize';
    this.#k.assertLive(op);
    this.#life.call(op, (call) => {
      const { T } = args.dims;
      if (T === 0) return;
      const [L, H, D] = [this.#L, this.#H, this.#D];
      const perLayer = layerBytes(T, H * D * bytesPerElement(this.#dtype));
      // The callback runs outside kvkit's error scopes: what it does on the device is the application's.
      const [kOut, vOut] = this.#k.runtime.scoped(() => {
        const outs = [call.take(this.#kOut, T), call.take(this.#vOut, T)] as const;
        this.#run(args, { kDst: outs[0].range(0, perLayer * L), vDst: outs[1].range(0, perLayer * L) }, perLayer, undefined, call);
        return outs;
      });
      const shape = Object.freeze([T, H, D]);
      call.deliverLayerViews(L, args.writeLayerKv, (l) => [
        new GpuTensor(this.#k, this.#dtype, shape, kOut, l * perLayer, { layer: l, ownsStorage: false }),
        new GpuTensor(this.#k, this.#dtype, shape, vOut, l * perLayer, { layer: l, ownsStorage: false }),
      ]);
    });
  }

  materializeInto(args: KvMaterializerMaterializeIntoChecked): void {
    const op = 'KvMaterializer.materializeInto';
    this.#k.assertLive(op);
    this.#life.call(op, (call) => {
      const { T, S } = args.dims;
      if (T === 0) return;
      const k = this.#k;
      const slots = { tensor: k.own(args.slots), duplicates: args.duplicates.slots };
      const kPool = k.own(args.kPool);
      if (rowKernelsWrite(kPool.dtype, this.#D)) {
        const poolLayerBytes = S * this.#H * this.#D * bytesPerElement(kPool.dtype);
        k.runtime.scoped(() => {
          const pools = poolWrites(k, args, this.#normWeights, this.#scaleWordOffset);
          this.#run(args, { kDst: kPool.range, vDst: k.own(args.vPool).range }, poolLayerBytes, slots, call, pools);
        });
        return;
      }
      // fp8 pools whose rows share words (D not a multiple of 4): every layer's K and V into the workspaces first (as materialize leaves them), then stored.
      const L = this.#L;
      const perLayer = layerBytes(T, this.#H * this.#D * bytesPerElement(this.#dtype));
      k.runtime.scoped(() => {
        const kOut = call.take(this.#kOut, T).range(0, perLayer * L);
        const vOut = call.take(this.#vOut, T).range(0, perLayer * L);
        // All of the call's rules checked once, ahead of both passes: the stores write nothing once any breaks.
        const gate = k.checks.reserve(this.#rules(args), args.dims);
        this.#run(args, { kDst: kOut, vDst: vOut }, perLayer, undefined, call, undefined, gate);
        const job = { sourceType: this.#dtype, layers: L, tokens: T, sourceLayerElements: perLayer / bytesPerElement(this.#dtype), layout: args.layout, dims: args.dims, slots: slots.tensor, duplicates: slots.duplicates, rules: this.#rules(args), op };
        const rows = { offset: 0, tokenStride: this.#H * this.#D, headStride: this.#D };
        storePoolRows(
          k,
          job,
          [
            { source: kOut, rows, pool: kPool, scale: k.own(args.kScale!) },
            { source: vOut, rows, pool: k.own(args.vPool), scale: k.own(args.vScale!) },
          ],
          gate,
        );
      });
    });
  }

  /** A call's rules the device checks: the contract's, then the eps tensor given at creation. */
  #rules(args: KvMaterializerMaterializeChecked | KvMaterializerMaterializeIntoChecked): DeviceCheck[] {
    return [...args.deviceChecks, ...(this.#epsCheck ? [this.#epsCheck] : [])];
  }

  dispose(): void {
    if (!this.#life.dispose()) return;
    this.#kvWeight.release();
    this.#normWeights.release();
    this.#cosSin?.release();
    for (const w of [this.#proj, this.#kOut, this.#vOut, this.#table]) w.release();
  }

  /** The projection GEMM, the cos/sin table (ropeBase), then norm + RoPE into the destinations (pools of `pools`' format where given). */
  #run(
    args: KvMaterializerMaterializeChecked | KvMaterializerMaterializeIntoChecked,
    dst: { kDst: BufferRange; vDst: BufferRange },
    destLayerBytes: number,
    slots: { tensor: GpuTensor; duplicates: DuplicateRule } | undefined,
    call: OpCall,
    pools?: { format: PoolFormat | undefined; params: PoolWriteParams },
    gate?: CallFlags,
  ): void {
    const k = this.#k;
    const { T } = args.dims;
    const [L, H, D, R] = [this.#L, this.#H, this.#D, this.#R];
    const N = L * 2 * H * D;
    const projBytes = T * N * bytesPerElement(this.#dtype);
    const proj = call.take(this.#proj, T).range(0, projBytes);
    const ctxHidden = k.own(args.ctxHidden);
    launchGemm(k, this.#dtype, { a: ctxHidden.range, w: this.#kvWeight.range(0, this.#kvWeight.byteLength), c: proj }, { M: T, N, K: this.#hidden });

    const positions = k.own(args.positions);
    let cosSin: BufferRange;
    if (this.#ropeSource === 'tokenTable') {
      cosSin = call.take(this.#table, T).range(0, T * R * 4);
      launchRopeTable(k, positions.dtype as IndexDType, { positions: positions.range, angleTable: this.#angleTable!, table: cosSin }, T, R, args.mropeSection, args.mropeInterleaved);
    } else {
      cosSin = this.#cosSin!.range(0, this.#cosSin!.byteLength);
    }

    const positionRule = args.deviceChecks.find((c) => c.arg === 'positions');
    const { flags, call: callFlag } = gate ?? k.checks.reserve(this.#rules(args), args.dims);
    const ownedSlots = slots && k.slotOwners.resolve(slots.tensor, T, args.dims.S ?? 0, slots.duplicates, call.op);
    launchNormRope(
      k,
      {
        kvType: this.#dtype,
        weightType: this.#weightType,
        cacheType: this.#cacheType,
        positionType: positions.dtype as IndexDType,
        slotType: slots?.tensor.dtype as IndexDType | undefined,
        D,
        R,
        style: this.#ropeStyle,
        ropeSource: this.#ropeSource,
        epsInWeights: true,
        pool: pools?.format,
      },
      {
        kv: proj,
        weights: this.#normWeights.range(0, this.#normWeights.byteLength),
        cosSin,
        positions: positions.range,
        ...(ownedSlots ? { slots: ownedSlots } : {}),
        ...dst,
        flags,
      },
      {
        tokens: T,
        layers: L,
        heads: H,
        // The contract's bound ([0, P) with a cache, [0, 2^31) with ropeBase: its rule's ceiling), never more than a u32 holds.
        positionBelow: positionRule!.below!,
        slotBelow: args.dims.S ?? 0,
        destLayerBytes,
        callFlag,
        epsWordOffset: this.#epsWordOffset,
        pool: pools?.params,
        mropeSection: args.mropeSection,
        mropeInterleaved: args.mropeInterleaved,
      },
    );
  }
}

/** Bytes of one layer of a [T, H, D] workspace, padded so each layer's view binds on its own. */
function layerBytes(tokens: number, bytesPerToken: number): number {
  return align(tokens * bytesPerToken, VIEW_ALIGN);
}
