import type { DType } from '@kvkit/contracts';
import type { CreateKvMaterializerChecked, KvMaterializerMaterializeChecked, KvMaterializerMaterializeIntoChecked, MaterializerKernels, RopeAngles } from '@kvkit/contracts/backend';
import { grownCapacity, OpLifecycle, ropeAngles, Workspace, writeCosSinRow, writeCosSinRows } from '@kvkit/contracts/backend';
import type { Readable } from '../math/rmsNorm.js';
import type { RopeStyle } from '../math/rope.js';
import type { CpuKernels } from '../runtime/cpuKernels.js';
import { CpuTensor } from '../runtime/cpuTensor.js';
import type { Storage } from '../runtime/cpuTensor.js';
import { floatAccess, indexAt } from '../runtime/floatAccess.js';
import type { SlotScatter } from '../runtime/scatterOrder.js';
import { normRopeStacked } from './fusedNormRopeStacked.js';
import { poolTarget, storePoolRows } from './poolStore.js';
import type { CosSinRow } from './fusedNormRopeStacked.js';

/** Past this many table entries (32 MiB of f64) rows are computed per call instead: same values, bounded memory. */
const MAX_TABLE_ENTRIES = 2 ** 22;

export function createKvMaterializer(backend: CpuKernels, args: CreateKvMaterializerChecked): MaterializerKernels {
  return new CpuKvMaterializer(backend, args);
}

/**
 * Holds exact f32 copies of the weights (so the caller may dispose the
 * tensors it passed), a cos/sin source, and workspaces kept between calls.
 */
class CpuKvMaterializer implements MaterializerKernels {
  readonly #backend: CpuKernels;
  readonly #dtype: DType;
  readonly #L: number;
  readonly #H: number;
  readonly #D: number;
  readonly #R: number;
  readonly #hidden: number;
  readonly #ropeStyle: RopeStyle;
  #kvWeight: Float32Array;
  #kNormWeight: Readable;
  #eps: Readable;
  #hiddenRow: Float64Array;
  readonly #cosSinRow: CosSinRow;
  /** ropeBase only: the angles, and a table of cos/sin rows grown by doubling from the positions seen. */
  readonly #angles: RopeAngles | undefined;
  #table: Float64Array | undefined;
  #tableRows = 0;
  /** Workspaces in tokens: the projection [T, L*2*H*D], and K and V [L, T, H, D]. */
  readonly #proj: Workspace<Storage>;
  readonly #k: Workspace<Storage>;
  readonly #v: Workspace<Storage>;
  readonly #life: OpLifecycle;

  constructor(backend: CpuKernels, args: CreateKvMaterializerChecked) {
    this.#backend = backend;
    const { L, H, D, R, hidden } = args.dims;
    this.#dtype = args.kvWeight.dtype;
    this.#L = L;
    this.#H = H;
    this.#D = D;
    this.#R = R;
    this.#hidden = hidden;
    this.#ropeStyle = args.ropeStyle;
    this.#kvWeight = backend.f32Copy(args.kvWeight);
    this.#kNormWeight = floatAccess('f32', backend.f32Copy(args.kNormWeight));
    if (typeof args.eps === 'number') {
      const eps = backend.storage('f32', L) as Float32Array;
      eps.fill(args.eps); // rounded to f32, as an eps tensor would hold it
      this.#eps = floatAccess('f32', eps);
    } else {
      this.#eps = floatAccess('f32', backend.f32Copy(args.eps));
    }
    this.#hiddenRow = backend.float64(hidden);
    // Released buffers are left to the garbage collector.
    const perToken = (elements: number) => new Workspace<Storage>({ allocate: (tokens) => backend.storage(this.#dtype, tokens * elements), release: () => {} });
    this.#proj = perToken(L * 2 * H * D);
    this.#k = perToken(L * H * D);
    this.#v = perToken(L * H * D);
    this.#life = new OpLifecycle('this KvMaterializer', backend);
    if (args.cosSinCache) {
      const cache = backend.f32Copy(args.cosSinCache);
      this.#cosSinRow = (p, out) => {
        for (let j = 0; j < R; j++) out[j] = cache[p * R + j]!;
      };
    } else {
      const angles = ropeAngles({ ropeBase: args.ropeBase!, rotaryDim: R, ropeScaling: args.ropeScaling, angles: args.angles });
      this.#angles = angles;
      if (args.maxPositionHint !== undefined) this.#growTable(args.maxPositionHint);
      this.#cosSinRow = (p, out) => {
        if (p < this.#tableRows) for (let j = 0; j < R; j++) out[j] = this.#table![p * R + j]!;
        else writeCosSinRow(out, 0, p, angles);
      };
    }
  }

  materialize(args: KvMaterializerMaterializeChecked): void {
    this.#life.call('KvMaterializer.materialize', (call) => {
      const { T } = args.dims;
      if (T === 0) return;
      const perLayer = T * this.#H * this.#D;
      const k = call.take(this.#k, T);
      const v = call.take(this.#v, T);
      this.#run(args, call.take(this.#proj, T), k, v, T, undefined);
      const shape = Object.freeze([T, this.#H, this.#D]);
      call.deliverLayerViews(this.#L, args.writeLayerKv, (l) => [
        new CpuTensor(this.#backend, this.#dtype, shape, k.subarray(l * perLayer, (l + 1) * perLayer), l),
        new CpuTensor(this.#backend, this.#dtype, shape, v.subarray(l * perLayer, (l + 1) * perLayer), l),
      ]);
    });
  }

  materializeInto(args: KvMaterializerMaterializeIntoChecked): void {
    this.#life.call('KvMaterializer.materializeInto', (call) => {
      const { T, S } = args.dims;
      if (T === 0) return;
      const slots = { values: this.#backend.own(args.slots).data, duplicates: args.duplicates.slots };
      if (args.layout === 'NHD' && args.kScale === undefined) {
        this.#run(args, call.take(this.#proj, T), this.#backend.own(args.kPool).data, this.#backend.own(args.vPool).data, S, slots);
        return;
      }
      // Paged or fp8 pools: K and V of every layer in the model dtype first (as materialize leaves them), then stored per layer.
      const k = call.take(this.#k, T);
      const v = call.take(this.#v, T);
      this.#run(args, call.take(this.#proj, T), k, v, T, undefined);
      const kPool = poolTarget(this.#backend, args.kPool, args.kScale, args.layout, args.dims);
      const vPool = poolTarget(this.#backend, args.vPool, args.vScale, args.layout, args.dims);
      const perLayer = T * this.#H * this.#D;
      for (let l = 0; l < this.#L; l++) {
        storePoolRows(kPool, l, floatAccess(this.#dtype, k), l * perLayer, slots, T);
        storePoolRows(vPool, l, floatAccess(this.#dtype, v), l * perLayer, slots, T);
      }
    });
  }

  dispose(): void {
    if (!this.#life.dispose()) return;
    this.#kvWeight = new Float32Array(0);
    this.#hiddenRow = new Float64Array(0);
    this.#table = undefined;
    this.#tableRows = 0;
    for (const w of [this.#proj, this.#k, this.#v]) w.release();
  }

  /** Projection, then the norm + RoPE of fusedNormRopeStacked into [L, rows, H, D] destinations. */
  #run(args: KvMaterializerMaterializeChecked | KvMaterializerMaterializeIntoChecked, proj: Storage, kDst: Storage, vDst: Storage, rows: number, slots: SlotScatter | undefined): void {
    const { T } = args.dims;
    const positions = this.#backend.own(args.positions).data;
    this.#coverPositions(positions, (args.mropeSection ? 3 : 1) * T);
    this.#project(args.ctxHidden, T, proj);
    normRopeStacked({
      T,
      L: this.#L,
      H: this.#H,
      D: this.#D,
      R: this.#R,
      ropeStyle: this.#ropeStyle,
      kv: floatAccess(this.#dtype, proj),
      kNormWeight: this.#kNormWeight,
      eps: this.#eps,
      positions,
      mropeSection: args.mropeSection,
      mropeInterleaved: args.mropeInterleaved,
      cosSinRow: this.#cosSinRow,
      kDst: floatAccess(this.#dtype, kDst),
      vDst: floatAccess(this.#dtype, vDst),
      rows,
      ...(slots ? { slots } : {}),
    });
  }

  /**
   * proj[t, l, :] = ctxHidden[t, :] @ kvWeight[l]^T for all layers at once.
   * Accumulated in f64 and rounded once to the model dtype: the values a GPU
   * GEMM leaves in its bf16 (or f16, f32) workspace, so the norm reads what it
   * would read there.
   */
  #project(ctxHidden: KvMaterializerMaterializeChecked['ctxHidden'], T: number, proj: Storage): void {
    const hidden = this.#hidden;
    const outRows = this.#L * 2 * this.#H * this.#D;
    const x = this.#backend.floats(ctxHidden);
    const out = floatAccess(this.#dtype, proj);
    const row = this.#hiddenRow;
    const w = this.#kvWeight;
    for (let t = 0; t < T; t++) {
      for (let i = 0; i < hidden; i++) row[i] = x.get(t * hidden + i);
      for (let r = 0; r < outRows; r++) {
        let acc = 0;
        const base = r * hidden;
        for (let i = 0; i < hidden; i++) acc += row[i]! * w[base + i]!;
        out.set(t * outRows + r, acc);
      }
    }
  }

  /** ropeBase only: grows the cos/sin table to cover the largest of the call's `count` positions (every mRoPE stream). */
  #coverPositions(positions: Storage, count: number): void {
    if (this.#angles === undefined) return;
    let largest = -1;
    for (let i = 0; i < count; i++) largest = Math.max(largest, indexAt(positions, i));
    if (largest >= this.#tableRows) this.#growTable(largest);
  }

  #growTable(largestPosition: number): void {
    const R = this.#R;
    const limit = Math.floor(MAX_TABLE_ENTRIES / R);
    const needed = largestPosition + 1;
    let rows = this.#tableRows === 0 ? needed : grownCapacity(this.#tableRows, needed);
    rows = Math.min(rows, Math.max(limit, this.#tableRows));
    if (rows <= this.#tableRows) return;
    const table = this.#backend.float64(rows * R);
    if (this.#table) table.set(this.#table);
    writeCosSinRows(table, this.#tableRows, rows - this.#tableRows, this.#angles!);
    this.#table = table;
    this.#tableRows = rows;
  }
}
