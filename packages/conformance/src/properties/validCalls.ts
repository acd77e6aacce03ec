import type { Backend, Tensor } from '@kvkit/contracts';
import { fusedNormRopeStackedOracle, ropePoolFusedOracle } from '../oracle.js';
import { collectLayers } from '../run-cases.js';
import { Checks, RELATIVE_TOLERANCE, ropeBaseTolerance } from '../tolerances.js';
import { gatherRows, readFloats, Scope, untyped } from '../tensors.js';
import type { UntypedMaterializer } from '../tensors.js';
import { buildArgs, createSpec, fusedSpec, isTensorSpec, makeTensor, materializerCallSpec, ropePoolSpec } from './callSpecs.js';
import type { CallSpec, TensorSpec } from './callSpecs.js';
import { largestPosition } from './configs.js';
import type { FusedConfig, MaterializerConfig, RopePoolConfig } from './configs.js';

/**
 * A random valid call on the backend under test and on the CPU reference
 * (given the same stored values as f32), compared within the package's
 * tolerances; copies, untouched rows and the last-token-wins rule for
 * repeated slots are compared bit for bit.
 */

function tensorArg(spec: CallSpec, name: string): TensorSpec {
  const arg = spec.args[name];
  if (!arg || !isTensorSpec(arg)) throw new Error(`the call has no tensor argument ${name}`);
  return arg;
}

function valuesOf(spec: CallSpec, name: string): number[] {
  return Array.from(tensorArg(spec, name).values);
}

/** `pool` after the tokens write `rows` at `slots` in order: the last token naming a slot wins. */
function scattered(pool: ArrayLike<number>, slots: readonly number[], rows: ArrayLike<number>, rowSize: number): Float32Array {
  const out = Float32Array.from(pool);
  slots.forEach((slot, n) => {
    if (slot >= 0) out.set(Array.prototype.slice.call(rows, n * rowSize, (n + 1) * rowSize) as number[], slot * rowSize);
  });
  return out;
}

/** Each slot named by a token keeps only its last token; the others skip. */
export function lastOwnersOnly(slots: readonly number[]): number[] {
  const last = new Map<number, number>();
  slots.forEach((slot, n) => {
    if (slot >= 0) last.set(slot, n);
  });
  return slots.map((slot, n) => (slot >= 0 && last.get(slot) === n ? slot : -1));
}

export async function checkFusedCall(backend: Backend, reference: Backend, c: FusedConfig): Promise<void> {
  const spec = fusedSpec(c);
  const s = new Scope(backend);
  const r = new Scope(reference);
  const checks = new Checks('fusedNormRopeStacked');
  try {
    const given = new Map<string, Tensor>();
    const out = untyped(backend).fusedNormRopeStacked(buildArgs(s, spec, false, given));
    s.track(out.kOut);
    s.track(out.vOut);
    const ref = untyped(reference).fusedNormRopeStacked(buildArgs(r, spec, true));
    r.track(ref.kOut);
    r.track(ref.vOut);
    await Promise.all([backend.sync(), reference.sync()]);
    const [k, v, refK] = await Promise.all([readFloats(backend, given.get('kOut') ?? out.kOut), readFloats(backend, given.get('vOut') ?? out.vOut), readFloats(reference, ref.kOut)]);
    const { T, L, H, D, R } = c;
    const oracle = fusedNormRopeStackedOracle({
      T,
      L,
      H,
      D,
      R,
      ropeStyle: c.ropeStyle ?? 'neox',
      kv: valuesOf(spec, 'kv'),
      kNormWeight: valuesOf(spec, 'kNormWeight'),
      eps: valuesOf(spec, 'eps'),
      cosSinCache: valuesOf(spec, 'cosSinCache'),
      positions: c.positions,
    });
    const layout = { shape: [L, T, H, D], axes: ['l', 't', 'h', 'd'] };
    checks.close('kOut vs CPU reference', k, refK, RELATIVE_TOLERANCE[c.dtype], layout);
    checks.close('kOut vs f64 formulas', k, oracle.k, RELATIVE_TOLERANCE[c.dtype], layout);
    checks.exact('vOut vs the V half of kv', v, oracle.v, layout);
    checks.done();
  } finally {
    s.dispose();
    r.dispose();
  }
}

export async function checkRopePoolCall(backend: Backend, reference: Backend, c: RopePoolConfig): Promise<void> {
  const spec = ropePoolSpec(c);
  const s = new Scope(backend);
  const r = new Scope(reference);
  const checks = new Checks('ropePoolFused');
  try {
    const made = new Map<string, Tensor>();
    const refMade = new Map<string, Tensor>();
    const out = untyped(backend).ropePoolFused(buildArgs(s, spec, false, made));
    s.track(out.qRot);
    s.track(out.kRot);
    const ref = untyped(reference).ropePoolFused(buildArgs(r, spec, true, refMade));
    r.track(ref.qRot);
    r.track(ref.kRot);
    await Promise.all([backend.sync(), reference.sync()]);
    const [qRot, kRot, kPool, vPool, refQ, refK, refKPool] = await Promise.all([
      readFloats(backend, out.qRot),
      readFloats(backend, out.kRot),
      readFloats(backend, made.get('kPool')!),
      readFloats(backend, made.get('vPool')!),
      readFloats(reference, ref.qRot),
      readFloats(reference, ref.kRot),
      readFloats(reference, refMade.get('kPool')!),
    ]);
    const { N, Hq, H, D } = c;
    const oracle = ropePoolFusedOracle({ N, Hq, H, D, R: c.R ?? D, ropeStyle: c.ropeStyle ?? 'neox', ropeBase: c.ropeBase, q: valuesOf(spec, 'q'), k: valuesOf(spec, 'k'), positions: c.positions });
    const tol = ropeBaseTolerance(c.dtype, Math.max(0, ...c.positions));
    checks.close('qRot vs CPU reference', qRot, refQ, tol, { shape: [N, Hq, D], axes: ['n', 'h', 'd'] });
    checks.close('kRot vs CPU reference', kRot, refK, tol, { shape: [N, H, D], axes: ['n', 'h', 'd'] });
    checks.close('qRot vs f64 formulas', qRot, oracle.qRot, tol, { shape: [N, Hq, D], axes: ['n', 'h', 'd'] });
    checks.close('kRot vs f64 formulas', kRot, oracle.kRot, tol, { shape: [N, H, D], axes: ['n', 'h', 'd'] });
    const poolLayout = { shape: [c.S, H, D], axes: ['s', 'h', 'd'] };
    // Each named slot holds its last token's kRot and v rows, bit for bit; every other row is as it was.
    checks.exact(`kPool vs kRot scattered at slots [${c.slots.join(', ')}], last token wins`, kPool, scattered(valuesOf(spec, 'kPool'), c.slots, kRot, H * D), poolLayout);
    checks.exact(`vPool vs v scattered at slots [${c.slots.join(', ')}], last token wins`, vPool, scattered(valuesOf(spec, 'vPool'), c.slots, valuesOf(spec, 'v'), H * D), poolLayout);
    checks.close('kPool vs CPU reference', kPool, refKPool, tol, poolLayout);
    checks.done();
  } finally {
    s.dispose();
    r.dispose();
  }
}

/** A materializer made from the config on `scope`'s backend (f32 on the reference). */
export function materializerFor(scope: Scope, c: MaterializerConfig, asF32 = false): UntypedMaterializer {
  return scope.owned(untyped(scope.backend).createKvMaterializer(buildArgs(scope, createSpec(c), asF32)));
}

export async function checkMaterializerCalls(backend: Backend, reference: Backend, c: MaterializerConfig): Promise<void> {
  const s = new Scope(backend);
  const r = new Scope(reference);
  const checks = new Checks('KvMaterializer');
  const { L, H, D } = c;
  const tol = c.rope.kind === 'ropeBase' ? ropeBaseTolerance(c.dtype, largestPosition(c)) : RELATIVE_TOLERANCE[c.dtype];
  try {
    const m = materializerFor(s, c);
    const refM = materializerFor(r, c, true);
    for (const [i, call] of c.calls.entries()) {
      const spec = materializerCallSpec(c, i);
      const at = ` (call ${i + 1}: ${call.entry}, T=${call.T})`;
      const ctx = makeTensor(s, tensorArg(spec, 'ctxHidden'));
      const refCtx = makeTensor(r, tensorArg(spec, 'ctxHidden'), true);
      const positions = makeTensor(s, tensorArg(spec, 'positions'));
      const refPositions = makeTensor(r, tensorArg(spec, 'positions'));
      const rowSize = H * D;
      if (call.entry === 'materialize') {
        const got = collectLayers(backend, m, ctx, positions);
        const want = collectLayers(reference, refM, refCtx, refPositions);
        await Promise.all([backend.sync(), reference.sync()]);
        const expected = call.T === 0 ? [] : Array.from({ length: L }, (_, l) => l);
        checks.sameIntegers(`writeLayerKv layers${at}`, got.map((x) => x.layer), expected);
        for (const [j, x] of got.entries()) {
          const [k, v, refK, refV] = await Promise.all([x.kData, x.vData, want[j]!.kData, want[j]!.vData]);
          checks.close(`layer ${x.layer} K vs CPU reference${at}`, k, refK, tol, { shape: [call.T, H, D], axes: ['t', 'h', 'd'] });
          checks.close(`layer ${x.layer} V vs CPU reference${at}`, v, refV, tol, { shape: [call.T, H, D], axes: ['t', 'h', 'd'] });
        }
        continue;
      }
      const pools = (on: Scope, asF32: boolean) => [makeTensor(on, tensorArg(spec, 'kPool'), asF32), makeTensor(on, tensorArg(spec, 'vPool'), asF32)] as const;
      const [kPool, vPool] = pools(s, false);
      const [kOwners, vOwners] = pools(s, false);
      const [refKPool, refVPool] = pools(r, true);
      const slotSpec = tensorArg(spec, 'slots');
      m.materializeInto({ ctxHidden: ctx, positions, kPool, vPool, slots: makeTensor(s, slotSpec) });
      m.materializeInto({ ctxHidden: ctx, positions, kPool: kOwners, vPool: vOwners, slots: makeTensor(s, { ...slotSpec, values: lastOwnersOnly(call.slots) }) });
      refM.materializeInto({ ctxHidden: refCtx, positions: refPositions, kPool: refKPool, vPool: refVPool, slots: makeTensor(r, slotSpec) });
      await Promise.all([backend.sync(), reference.sync()]);
      const [k, v, kOnly, vOnly, refK, refV] = await Promise.all([kPool, vPool, kOwners, vOwners].map((t) => readFloats(backend, t)).concat([refKPool, refVPool].map((t) => readFloats(reference, t))));
      const layout = { shape: [L, call.S, H, D], axes: ['l', 's', 'h', 'd'] };
      checks.close(`kPool vs CPU reference${at}`, k!, refK!, tol, layout);
      checks.close(`vPool vs CPU reference${at}`, v!, refV!, tol, layout);
      checks.exact(`kPool vs the same call with only each slot's last token${at}`, k!, kOnly!, layout);
      checks.exact(`vPool vs the same call with only each slot's last token${at}`, v!, vOnly!, layout);
      const named = new Set(call.slots.filter((slot) => slot >= 0));
      const untouched = Array.from({ length: L * call.S }, (_, row) => row).filter((row) => !named.has(row % call.S));
      checks.exact(`kPool rows no token names${at}`, gatherRows(k!, untouched, rowSize), gatherRows(valuesOf(spec, 'kPool'), untouched, rowSize));
      checks.exact(`vPool rows no token names${at}`, gatherRows(v!, untouched, rowSize), gatherRows(valuesOf(spec, 'vPool'), untouched, rowSize));
    }
    checks.done();
  } finally {
    s.dispose();
    r.dispose();
  }
}
