import type {
  CreateKvMaterializerChecked,
  FloatDType,
  KvMaterializerMaterializeChecked,
  KvMaterializerMaterializeIntoChecked,
  MaterializerKernels,
} from '@kvkit/contracts';
import { ContractError } from '@kvkit/errors-catalog';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import { CudaTensor, ELEMENT_BYTES } from '../runtime/cudaTensor.js';
import type { DeviceBuffer } from '../runtime/memory.js';
import { boundCheck, launchNormRope } from './normRope.js';
import type { Angles } from './normRope.js';
import { Projection } from './projection.js';

/** A reusable device buffer whose capacity, counted in tokens, grows by doubling. */
interface Workspace {
  buffer: DeviceBuffer | undefined;
  tokens: number;
}

export function createKvMaterializer(kernels: CudaKernels, args: CreateKvMaterializerChecked): MaterializerKernels {
  return new CudaKvMaterializer(kernels, args);
}

/**
 * Holds the weights (sharing the caller's allocations, so disposing the
 * tensors passed in is fine), the angle source, and workspaces kept between
 * calls. materialize: one GEMM for all layers into [T, L, 2*H*D], one norm +
 * RoPE launch into [L, T, H, D] K and V workspaces, then writeLayerKv with
 * [T, H, D] views of them. materializeInto: the same launch writes the pools.
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
  readonly #kvWeight: DeviceBuffer;
  readonly #kNormWeight: DeviceBuffer;
  readonly #weightIsF32: boolean;
  readonly #eps: DeviceBuffer;
  readonly #angles: Angles;
  readonly #projection: Projection;
  readonly #proj: Workspace = { buffer: undefined, tokens: 0 };
  readonly #k: Workspace = { buffer: undefined, tokens: 0 };
  readonly #v: Workspace = { buffer: undefined, tokens: 0 };
  /** True while writeLayerKv runs: a nested call then works in fresh buffers instead of overwriting the views. */
  #busy = false;
  #disposed = false;

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
    this.#kvWeight = this.#hold(kvWeight.buffer);
    const kNormWeight = kernels.own(args.kNormWeight);
    this.#kNormWeight = this.#hold(kNormWeight.buffer);
    this.#weightIsF32 = kNormWeight.dtype === 'f32' && this.#dtype !== 'f32';
    if (typeof args.eps === 'number') {
      this.#eps = kernels.cx.alloc(L * 4, op);
      this.#held.push(this.#eps);
      kernels.cx.upload(this.#eps.ptr, new Float32Array(L).fill(args.eps), op); // rounded to f32, as an eps tensor would hold it
    } else {
      this.#eps = this.#hold(kernels.own(args.eps).buffer);
    }
    if (args.cosSinCache) {
      const cache = kernels.own(args.cosSinCache);
      this.#angles = { cache: this.#hold(cache.buffer).ptr, cacheDType: cache.dtype as FloatDType };
      this.#P = cache.shape[0];
    } else {
      // Angles on the device from f_j: no table to size, so no call ever looks at position values on the host.
      this.#angles = { ropeFrequencies: kernels.ropeFrequencies(args.ropeBase!, R, op) };
      this.#P = undefined;
    }
    this.#projection = new Projection(kernels, this.#dtype, L * 2 * H * D, hidden);
  }

  #hold(buffer: DeviceBuffer): DeviceBuffer {
    this.#held.push(buffer.retain());
    return buffer;
  }

  materialize(args: KvMaterializerMaterializeChecked): void {
    const op = 'KvMaterializer.materialize';
    this.#checkLive(op);
    const { T } = args.dims;
    if (T === 0) return;
    const kernels = this.#kernels;
    kernels.cx.makeCurrent();
    const { L, H, D } = this;
    const es = ELEMENT_BYTES[this.#dtype];
    const nested = this.#busy;
    const perLayer = T * H * D;
    const proj = this.#workspace(this.#proj, T, L * 2 * H * D * es, nested, op);
    const k = this.#workspace(this.#k, T, L * H * D * es, nested, op);
    const v = this.#workspace(this.#v, T, L * H * D * es, nested, op);
    try {
      this.#run(args, proj.ptr, k.ptr, v.ptr, T, undefined, op);
      const shape = Object.freeze([T, H, D]);
      const writeLayerKv = args.writeLayerKv as (layer: number, k: CudaTensor, v: CudaTensor) => unknown;
      this.#busy = true;
      try {
        for (let l = 0; l < L; l++) {
          const byteOffset = l * perLayer * es;
          const kView = new CudaTensor(kernels, this.#dtype, shape, k, { byteOffset, layer: l });
          const vView = new CudaTensor(kernels, this.#dtype, shape, v, { byteOffset, layer: l });
          try {
            writeLayerKv(l, kView, vView);
          } finally {
            kView.dispose();
            vView.dispose();
          }
        }
      } finally {
        this.#busy = nested;
      }
    } finally {
      // A nested call's buffers are freed in stream order: reads enqueued from its callback still see them.
      if (nested) for (const b of [proj, k, v]) b.release();
    }
  }

  materializeInto(args: KvMaterializerMaterializeIntoChecked): void {
    const op = 'KvMaterializer.materializeInto';
    this.#checkLive(op);
    const { T, S } = args.dims;
    if (T === 0) return;
    const kernels = this.#kernels;
    kernels.cx.makeCurrent();
    const es = ELEMENT_BYTES[this.#dtype];
    const nested = this.#busy;
    const proj = this.#workspace(this.#proj, T, this.L * 2 * this.H * this.D * es, nested, op);
    try {
      const slots = kernels.own(args.slots);
      this.#run(args, proj.ptr, kernels.own(args.kPool).ptr, kernels.own(args.vPool).ptr, S, { ptr: slots.ptr, areI64: slots.dtype === 'i64' }, op);
    } finally {
      if (nested) proj.release();
    }
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

  /** Projection, then the norm + RoPE into [L, rows, H, D] destinations (rows: T, or S at `slots`). */
  #run(
    args: KvMaterializerMaterializeChecked | KvMaterializerMaterializeIntoChecked,
    proj: number,
    kDst: number,
    vDst: number,
    rows: number,
    slots: { ptr: number; areI64: boolean } | undefined,
    op: string,
  ): void {
    const kernels = this.#kernels;
    const { T } = args.dims;
    const ctxHidden = kernels.own(args.ctxHidden);
    const positions = kernels.own(args.positions);
    // Checks are numbered in the contract's order: positions, then slots.
    const positionRule = boundCheck(kernels, args.deviceChecks, 'positions', args.dims, { min: 0, below: this.#P ?? Infinity });
    const slotRule = slots ? boundCheck(kernels, args.deviceChecks, 'slots', args.dims, { min: -Infinity, below: rows }) : undefined;
    this.#projection.run(ctxHidden.ptr, this.#kvWeight.ptr, proj, T, op);
    launchNormRope(kernels, {
      op,
      dtype: this.#dtype,
      T,
      L: this.#L,
      H: this.#H,
      D: this.#D,
      R: this.#R,
      gptj: this.#gptj,
      kv: proj,
      kNormWeight: this.#kNormWeight.ptr,
      weightIsF32: this.#weightIsF32,
      eps: this.#eps.ptr,
      angles: this.#angles,
      positions: positions.ptr,
      positionsAreI64: positions.dtype === 'i64',
      positionRule,
      ...(slots && slotRule ? { slots: { ...slots, rule: slotRule } } : {}),
      kOut: kDst,
      vOut: vDst,
      outRows: rows,
    });
  }

  /** A buffer for at least `tokens` tokens: the kept one (grown by doubling), or a fresh one for a nested call. */
  #workspace(w: Workspace, tokens: number, bytesPerToken: number, nested: boolean, op: string): DeviceBuffer {
    const cx = this.#kernels.cx;
    if (nested) return cx.alloc(tokens * bytesPerToken, op);
    if (w.buffer === undefined || w.tokens < tokens) {
      w.buffer?.release();
      w.tokens = Math.max(tokens, 2 * w.tokens);
      w.buffer = cx.alloc(w.tokens * bytesPerToken, op);
    }
    return w.buffer;
  }

  #checkLive(op: string): void {
    if (this.#disposed || this.#kernels.disposed) throw new ContractError('KV003', op, { arg: 'this KvMaterializer' });
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    if (this.#kernels.disposed) return;
    this.#projection.dispose();
    for (const w of [this.#proj, this.#k, this.#v]) {
      w.buffer?.release();
      w.buffer = undefined;
      w.tokens = 0;
    }
    for (const b of this.#held.splice(0)) b.release();
  }
}
