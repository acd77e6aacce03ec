import type { FloatDType, PoolDType } from '@kvkit/contracts';
import type { CreateKvMaterializerChecked, DeviceCheck, KvMaterializerMaterializeChecked, KvMaterializerMaterializeIntoChecked, MaterializerKernels } from '@kvkit/contracts/backend';
import { contiguousStrides, MAX_POSITION_BELOW, OpLifecycle, Workspace } from '@kvkit/contracts/backend';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import { CudaTensor, ELEMENT_BYTES } from '../runtime/cudaTensor.js';
import { aligned, GATHER_ALIGNMENT } from '../runtime/gatherStrided.js';
import type { DeviceBuffer } from '../runtime/memory.js';
import type { SlotClaims } from '../runtime/slotOwners.js';
import { boundsOf, claimSlots, deviceRules, launchNormRope, layerMajorLayout, normRopeVectorPath } from './normRope.js';
import type { PoolSlots } from './normRope.js';
import type { Angles, BoundCheck, NormRopeJob } from './normRope.js';
import { poolScales, poolWrite } from './kvPools.js';
import type { PoolWrite } from './kvPools.js';
import { Projection } from './projection.js';
import { tuning } from './tuning.js';

/** Layers [first, first + layers) of the overlapped schedule: one GEMM, then one norm + RoPE launch. */
interface Stage {
  readonly first: number;
  readonly layers: number;
}

export function createKvMaterializer(kernels: CudaKernels, args: CreateKvMaterializerChecked): MaterializerKernels {
  return new CudaKvMaterializer(kernels, args);
}

/**
 * Holds the weights (sharing the caller's allocations, so disposing the
 * tensors passed in is fine), the angle source, and workspaces kept between
 * calls. The projection writes each layer's K and V as [T, H, D] tensors
 * ([L, 2, T, H, D]: per-layer GEMMs, one strided-batched call). materialize:
 * one norm + RoPE launch over K in place (V is final as projected), then
 * writeLayerKv with views of that workspace. materializeInto: the same launch
 * reads K and V there and writes the pools at `slots` (NHD or HND, the
 * model dtype or fp8 codes) from the rows it holds. tuning.materializerSchedule
 * picks the schedule: that one ('batched'), or 'overlapped' (#overlapped).
 */
class CudaKvMaterializer implements MaterializerKernels {
  readonly #kernels: CudaKernels;
  readonly #dtype: FloatDType;
  readonly #L: number;
  readonly #H: number;
  readonly #D: number;
  readonly #R: number;
  readonly #P: number | undefined;
  readonly #gptj: boolean;
  readonly #held: DeviceBuffer[] = [];
  /** Device addresses of the weights the materializer keeps (see #keep). */
  readonly #kvWeight: number;
  readonly #kNormWeight: number;
  readonly #weightIsF32: boolean;
  readonly #eps: number;
  /** The eps rule of an eps tensor with the dims it was checked under, numbered by every call (a number was checked at creation). */
  readonly #epsRule: { readonly check: DeviceCheck; readonly dims: Readonly<Record<string, number>> } | undefined;
  readonly #angles: Angles;
  readonly #projection: Projection;
  readonly #hidden: number;
  /** The overlapped schedule's GEMMs, by layers per stage and multiprocessors targeted (made on first use). */
  readonly #stageProjections = new Map<string, Projection>();
  /** The projection, [L, 2, T, H, D], in tokens. */
  readonly #kv: Workspace<DeviceBuffer>;
  /** Normed K, [L, T, H, D], only for head dims the in-place kernel does not take. */
  readonly #k: Workspace<DeviceBuffer>;
  readonly #life: OpLifecycle;

  constructor(kernels: CudaKernels, args: CreateKvMaterializerChecked) {
    const op = 'createKvMaterializer';
    this.#kernels = kernels;
    const { L, H, D, R, hidden } = args.dims;
    const kvWeight = kernels.own(args.kvWeight);
    this.#dtype = kvWeight.dtype as FloatDType;
    this.#L = L;
    this.#H = H;
    this.#D = D;
    this.#R = R;
    this.#gptj = args.ropeStyle === 'gptj';
    // The GEMM's weight at cuBLASLt's assumed alignment; the others as the norm kernel takes them.
    this.#kvWeight = this.#keep(kvWeight, GATHER_ALIGNMENT, op);
    const kNormWeight = kernels.own(args.kNormWeight);
    this.#kNormWeight = this.#keep(kNormWeight, 1, op);
    this.#weightIsF32 = kNormWeight.dtype === 'f32' && this.#dtype !== 'f32';
    if (typeof args.eps === 'number') {
      const eps = kernels.cx.alloc(L * 4, op);
      this.#held.push(eps);
      kernels.cx.upload(eps.ptr, new Float32Array(L).fill(args.eps), op); // rounded to f32, as an eps tensor would hold it
      this.#eps = eps.ptr;
    } else {
      this.#eps = this.#keep(kernels.own(args.eps), 1, op);
    }
    const epsRule = args.deviceChecks.find((c) => c.arg === 'eps');
    this.#epsRule = epsRule && { check: epsRule, dims: { ...args.dims } };
    if (args.cosSinCache) {
      const cache = kernels.own(args.cosSinCache);
      this.#angles = { cache: this.#keep(cache, 1, op), cacheDType: cache.dtype as FloatDType };
      this.#P = cache.shape[0];
    } else {
      // Angles on the device from the angle table: nothing to size, so no call ever looks at position values on the host.
      this.#angles = { ropeAngles: kernels.ropeAngles({ ropeBase: args.ropeBase!, rotaryDim: R, ropeScaling: args.ropeScaling, angles: args.angles }, op) };
      this.#P = undefined;
    }
    // kvWeight [L, 2*H*D, hidden] is [L, 2, H*D, hidden]: 2L blocks of H*D rows.
    this.#projection = new Projection(kernels, this.#dtype, L * 2 * H * D, hidden, 2 * L);
    this.#hidden = hidden;
    const es = ELEMENT_BYTES[this.#dtype];
    // A released buffer is freed in stream order: reads already enqueued still see it.
    const workspace = (bytesPerToken: number) =>
      new Workspace<DeviceBuffer>({ allocate: (tokens, callOp) => kernels.cx.alloc(tokens * bytesPerToken, callOp), release: (b) => b.release() });
    this.#kv = workspace(L * 2 * H * D * es);
    this.#k = workspace(L * H * D * es);
    this.#life = new OpLifecycle('this KvMaterializer', kernels);
  }

  /**
   * A tensor the materializer reads on every call: the caller's allocation,
   * retained, where the tensor is contiguous and aligned to `alignment` bytes;
   * else a contiguous copy of its own (a view's elements, gathered once).
   */
  #keep(t: CudaTensor, alignment: number, op: string): number {
    if (t.contiguous && t.ptr % alignment === 0) {
      this.#held.push(t.buffer.retain());
      return t.ptr;
    }
    const copy = this.#kernels.cx.alloc(t.byteLength, op);
    this.#held.push(copy);
    this.#kernels.gather.copy(t, copy.ptr, op);
    return copy.ptr;
  }

  materialize(args: KvMaterializerMaterializeChecked): void {
    this.#life.call('KvMaterializer.materialize', (call) => {
      const { T } = args.dims;
      if (T === 0) return;
      const kernels = this.#kernels;
      kernels.cx.makeCurrent();
      const { L, H, D } = this;
      const perLayer = T * H * D;
      const kv = call.take(this.#kv, T);
      const inputs = this.#inputs(args, [], call.op);
      const es = ELEMENT_BYTES[this.#dtype];
      const stages = this.#stages(T);
      // In place only where every launch takes the vector kernel: one over all layers, or one per stage.
      const inPlace = (stages ?? [{ first: 0, layers: L }]).every((s) =>
        normRopeVectorPath(this.#dtype, D, this.#R, this.#gptj, [kv.ptr + 2 * s.first * perLayer * es, this.#kNormWeight + s.first * D * this.#weightBytes], { tokens: T, headRows: s.layers * H }),
      );
      const k = inPlace ? kv : call.take(this.#k, T);
      const rules = this.#positionRule(args);
      deviceRules(kernels, args.deviceChecks, args.dims, { positions: inputs.positions });
      // K rows normed and rotated in place, or into the K workspace; V rows stay as projected.
      this.#projectAndNorm(args, inputs.ctxHidden, kv.ptr, inputs.positions, rules, { kOut: k.ptr, vOut: 0, outLayerStride: (inPlace ? 2 : 1) * perLayer, outElementBytes: es }, stages);
      const shape = Object.freeze([T, H, D]);
      const strides = contiguousStrides(shape);
      // Windows of the workspaces, whose buffers are their storage roots (views of them place themselves there).
      const window = (buffer: DeviceBuffer, offset: number, layer: number) => new CudaTensor(kernels, this.#dtype, shape, buffer, { root: buffer, offset, strides, capacity: Math.floor(buffer.bytes / es), layer });
      call.deliverLayerViews(L, args.writeLayerKv, (l) => [window(k, (inPlace ? 2 * l : l) * perLayer, l), window(kv, (2 * l + 1) * perLayer, l)]);
    });
  }

  materializeInto(args: KvMaterializerMaterializeIntoChecked): void {
    this.#life.call('KvMaterializer.materializeInto', (call) => {
      const { T, S } = args.dims;
      if (T === 0) return;
      const kernels = this.#kernels;
      kernels.cx.makeCurrent();
      const kv = call.take(this.#kv, T);
      const slotTensor = kernels.own(args.slots);
      const kPool = kernels.own(args.kPool);
      const scales = [args.kScale, args.vScale].map((s) => (s ? kernels.own(s) : undefined));
      // Slots and scales are read by index: views of them gathered with the call's other inputs.
      const inputs = this.#inputs(args, [slotTensor, ...scales.filter((s) => s !== undefined)], call.op);
      const [slotsAt, ...scalesAt] = inputs.more;
      const [kScaleAt, vScaleAt] = poolScales(scales, scalesAt);
      const pools = poolWrite(args.layout, args.dims, kPool.dtype as PoolDType, [kScaleAt, vScaleAt]);
      const positionRule = this.#positionRule(args);
      deviceRules(kernels, args.deviceChecks, args.dims, { positions: inputs.positions, slots: slotsAt, kScale: kScaleAt?.ptr, vScale: vScaleAt?.ptr });
      const slots = { ptr: slotsAt!, areI64: slotTensor.dtype === 'i64', rule: boundsOf(args.deviceChecks, 'slots', { min: -Infinity, below: S }), duplicates: args.duplicates.slots };
      // The claims need only the slots: enqueued ahead of the projection, they are done by the time the pools are written.
      const claims = claimSlots(kernels, slots, T, call.op);
      // Both pool layouts put a layer's S*H*D elements together.
      const out = { kOut: kPool.ptr, vOut: kernels.own(args.vPool).ptr, outLayerStride: S * this.#H * this.#D, outElementBytes: ELEMENT_BYTES[kPool.dtype], slots, claims, pools };
      this.#projectAndNorm(args, inputs.ctxHidden, kv.ptr, inputs.positions, positionRule, out, this.#stages(T));
    });
  }

  get L(): number {
    return this.#L;
  }
  get H(): number {
    return this.#H;
  }
  get D(): number {
    return this.#D;
  }

  #positionRule(args: KvMaterializerMaterializeChecked | KvMaterializerMaterializeIntoChecked): BoundCheck {
    return boundsOf(args.deviceChecks, 'positions', { min: 0, below: this.#P ?? MAX_POSITION_BELOW });
  }

  /**
   * The call's per-call inputs as the kernels read them, contiguous: views
   * gathered (one gather per call, so every copy lives until the call's
   * kernels ran), ctxHidden also at the GEMM's alignment.
   */
  #inputs(args: KvMaterializerMaterializeChecked | KvMaterializerMaterializeIntoChecked, more: readonly CudaTensor[], op: string): { ctxHidden: number; positions: number; more: number[] } {
    const kernels = this.#kernels;
    const gather = kernels.gather;
    const [ctxHidden, positions, ...rest] = gather.contiguous([aligned(kernels.own(args.ctxHidden), GATHER_ALIGNMENT), kernels.own(args.positions), ...more], op);
    return { ctxHidden: ctxHidden!, positions: positions!, more: rest };
  }

  /**
   * The projection of `ctxHidden` into `kv`, then the norm + RoPE over it into [L, rows, H, D] destinations (rows: T,
   * or S at `slots`; layers outLayerStride elements of outElementBytes apart): on the batched schedule, or with
   * `stages`, the overlapped one.
   */
  #projectAndNorm(
    args: KvMaterializerMaterializeChecked | KvMaterializerMaterializeIntoChecked,
    ctxHidden: number,
    kv: number,
    positionsAt: number,
    positionRule: BoundCheck,
    out: { kOut: number; vOut: number; outLayerStride: number; outElementBytes: number; slots?: PoolSlots; claims?: SlotClaims; pools?: PoolWrite },
    stages: readonly Stage[] | undefined,
  ): void {
    const { T } = args.dims;
    const positions = this.#kernels.own(args.positions);
    // Numbered after the call's own rules.
    if (this.#epsRule) this.#kernels.badValues.enqueue(this.#epsRule.check, this.#epsRule.dims, this.#eps);
    const job: NormRopeJob = {
      op: out.slots ? 'KvMaterializer.materializeInto' : 'KvMaterializer.materialize',
      dtype: this.#dtype,
      T,
      L: this.#L,
      H: this.#H,
      D: this.#D,
      R: this.#R,
      gptj: this.#gptj,
      kv,
      kvLayout: layerMajorLayout(T, this.#H, this.#D),
      kNormWeight: this.#kNormWeight,
      weightIsF32: this.#weightIsF32,
      eps: this.#eps,
      angles: this.#angles,
      positions: positionsAt,
      positionsAreI64: positions.dtype === 'i64',
      mropeSection: args.mropeSection,
      mropeInterleaved: args.mropeInterleaved,
      positionRule,
      ...(out.slots ? { slots: out.slots } : {}),
      ...(out.pools ? { pools: out.pools } : {}),
      kOut: out.kOut,
      vOut: out.vOut,
      outLayerStride: out.outLayerStride,
    };
    if (!stages) {
      this.#projection.run(ctxHidden, this.#kvWeight, kv, T, job.op);
      launchNormRope(this.#kernels, job, out.claims);
      return;
    }
    const es = ELEMENT_BYTES[this.#dtype];
    this.#overlapped(stages, ctxHidden, kv, T, job.op, (stage, beside) => {
      // The stage's layers alone: every per-layer address moved to its first layer.
      const at = stage.first;
      const outAt = at * job.outLayerStride * out.outElementBytes;
      const stageJob: NormRopeJob = {
        ...job,
        L: stage.layers,
        kv: kv + at * job.kvLayout.layerStride * es,
        kNormWeight: job.kNormWeight + at * this.#D * this.#weightBytes,
        eps: job.eps + at * 4,
        kOut: job.kOut + outAt,
        vOut: job.vOut === 0 ? 0 : job.vOut + outAt,
      };
      launchNormRope(this.#kernels, stageJob, out.claims, beside);
    });
  }

  /** Bytes of a kNormWeight element as the kernel reads it. */
  get #weightBytes(): number {
    return this.#weightIsF32 ? 4 : ELEMENT_BYTES[this.#dtype];
  }

  /**
   * The overlapped schedule's stages for T tokens, or undefined for the batched one: tuning picks it, the layers
   * per stage and the fewest tokens; it needs two stages at least, and every stage's weight and workspace block at
   * the GEMM's alignment.
   */
  #stages(T: number): readonly Stage[] | undefined {
    if (tuning.materializerSchedule !== 'overlapped' || T < tuning.overlapMinTokens) return undefined;
    const L = this.#L;
    const asked = tuning.overlapLayersPerStage;
    const per = Number.isSafeInteger(asked) && asked >= 1 ? asked : 1;
    if (per >= L) return undefined;
    // A layer's K and V rows of W, and its [2, T, H*D] block of the workspace, in bytes.
    const layerBytes = 2 * this.#H * this.#D * ELEMENT_BYTES[this.#dtype];
    const stages: Stage[] = [];
    for (let first = 0; first < L; first += per) {
      if ((first * layerBytes * this.#hidden) % GATHER_ALIGNMENT !== 0 || (first * layerBytes * T) % GATHER_ALIGNMENT !== 0) return undefined;
      stages.push({ first, layers: Math.min(per, L - first) });
    }
    return stages;
  }

  /** The GEMM of a stage of `layers` layers (2*layers blocks of H*D rows, as the batched one's 2L), for `multiprocessors` (0: all). */
  #stageProjection(layers: number, multiprocessors: number): Projection {
    const key = `${layers}/${multiprocessors}`;
    let projection = this.#stageProjections.get(key);
    if (!projection) {
      projection = new Projection(this.#kernels, this.#dtype, layers * 2 * this.#H * this.#D, this.#hidden, 2 * layers, undefined, multiprocessors || undefined);
      this.#stageProjections.set(key, projection);
    }
    return projection;
  }

  /**
   * The overlapped schedule: each stage's GEMM on the main stream with an event recorded after it; then, on the
   * context's second stream, the previous stage's norm + RoPE (`normStage`) behind that stage's event, so it runs
   * beside this stage's GEMM (memory-bound beside compute-bound), enqueued after it so the GEMM's blocks are ahead
   * in line. The value check runs there first, behind the call's gathers and claims, and gates every stage's launch.
   * The main stream then waits for the second one, so whatever follows the call (the next call's GEMM into this
   * workspace, reads, frees, the caller's own work on its stream) sees all of it done.
   */
  #overlapped(stages: readonly Stage[], ctxHidden: number, kv: number, T: number, op: string, normStage: (stage: Stage, beside: { readonly stream: bigint; readonly call: number; readonly multiprocessors?: number }) => void): void {
    const kernels = this.#kernels;
    const cx = kernels.cx;
    const aux = cx.auxStream(op);
    const layerBytes = 2 * this.#H * this.#D * ELEMENT_BYTES[this.#dtype];
    const asked = tuning.overlapNormMultiprocessors;
    const normSMs = Number.isSafeInteger(asked) && asked > 0 && asked < cx.multiprocessors ? asked : 0;
    cx.order(cx.stream, aux, op);
    try {
      const call = kernels.badValues.checkCall(op, aux);
      let projected: { stage: Stage; event: bigint } | undefined;
      for (const [i, stage] of stages.entries()) {
        // Beside the previous stage's norm: all but its multiprocessors (the first runs beside the small check only).
        const gemmSMs = normSMs > 0 && i > 0 ? cx.multiprocessors - normSMs : 0;
        this.#stageProjection(stage.layers, gemmSMs).run(ctxHidden, this.#kvWeight + stage.first * layerBytes * this.#hidden, kv + stage.first * layerBytes * T, T, op);
        const event = cx.record(op);
        if (projected) {
          cx.queueWait(aux, projected.event, op);
          normStage(projected.stage, { stream: aux, call, ...(normSMs > 0 ? { multiprocessors: normSMs } : {}) });
        }
        projected = { stage, event };
      }
      // Nothing beside the last norm: the whole device.
      cx.queueWait(aux, projected!.event, op);
      normStage(projected!.stage, { stream: aux, call });
    } finally {
      // Even after a failed enqueue: nothing behind the call may run beside what reached the second stream.
      cx.order(aux, cx.stream, op);
    }
  }

  dispose(): void {
    if (!this.#life.dispose()) return;
    if (this.#kernels.disposed) return;
    this.#projection.dispose();
    for (const projection of this.#stageProjections.values()) projection.dispose();
    this.#stageProjections.clear();
    this.#kv.release();
    this.#k.release();
    for (const b of this.#held.splice(0)) b.release();
  }
}
