import type { Backend, FloatDType, Tensor } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import { fusedNormRopeStackedOracle, ropePoolFusedOracle } from '../oracle.js';
import { ATTENTION_TOLERANCE, LSE_TOLERANCE, pagedAttentionOracle, rowStart } from '../pagedAttention.js';
import { collectLayers } from '../run-cases.js';
import { Checks, RELATIVE_TOLERANCE, ropeBaseTolerance } from '../tolerances.js';
import { gatherRows, readFloats, Scope, tensorProblems, untyped } from '../tensors.js';
import type { UntypedMaterializer } from '../tensors.js';
import { attentionSpec, buildArgs, copyDestination, copySpec, createSpec, fusedSpec, isTensorSpec, makeTensor, materializerCallSpec, roundToPool, ropePoolSpec } from './callSpecs.js';
import type { CallSpec, TensorSpec } from './callSpecs.js';
import { largestPosition } from './configs.js';
import type { AttentionConfig, CopyConfig, FusedConfig, MaterializerConfig, RopePoolConfig } from './configs.js';

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

/** A scale tensor's values spread over the heads ([1] is every head's); undefined where the call has none. */
function perHead(spec: CallSpec, name: string, H: number): number[] | undefined {
  const arg = spec.args[name];
  if (!arg || !isTensorSpec(arg)) return undefined;
  return Array.from({ length: H }, (_, h) => arg.values[arg.values.length === 1 ? 0 : h]!);
}

export async function checkAttentionCall(backend: Backend, reference: Backend, c: AttentionConfig): Promise<void> {
  const spec = attentionSpec(c);
  const s = new Scope(backend);
  const r = new Scope(reference);
  const checks = new Checks('pagedAttention');
  try {
    const made = new Map<string, Tensor>();
    const got = untyped(backend).pagedAttention(buildArgs(s, spec, false, made));
    s.track(got.out);
    s.track(got.lse);
    const ref = untyped(reference).pagedAttention(buildArgs(r, spec));
    r.track(ref.out);
    r.track(ref.lse);
    await Promise.all([backend.sync(), reference.sync()]);
    const { Hq, H, D } = c;
    const qIndptr = valuesOf(spec, 'qIndptr');
    const N = qIndptr.at(-1)!;
    for (const [name, t, dtype, shape] of [['out', got.out, c.dtype, [N, Hq, D]], ['lse', got.lse, 'f32', [N, Hq]]] as const) {
      const problems = tensorProblems(t, dtype, shape, backend);
      checks.that(problems.length === 0, `${name}: ${problems.join('; ')}`);
    }
    if (c.out === 'given') checks.that(got.out === made.get('out'), "out is not the caller's tensor");
    const [out, lse, refOut, refLse, kPool, vPool] = await Promise.all([
      readFloats(backend, got.out),
      readFloats(backend, got.lse),
      readFloats(reference, ref.out),
      readFloats(reference, ref.lse),
      readFloats(backend, made.get('kPool')!),
      readFloats(backend, made.get('vPool')!),
    ]);
    const oracle = pagedAttentionOracle({
      Hq,
      H,
      D,
      layout: c.layout ?? 'NHD',
      pageSize: c.pageSize,
      q: valuesOf(spec, 'q'),
      k: valuesOf(spec, 'kPool'),
      v: valuesOf(spec, 'vPool'),
      kScale: perHead(spec, 'kScale', H),
      vScale: perHead(spec, 'vScale', H),
      qIndptr,
      kvIndptr: valuesOf(spec, 'kvIndptr'),
      kvSlots: c.kvSlots,
      causal: c.causal ?? true,
      scale: c.scale ?? 1 / Math.sqrt(D),
      slidingWindow: c.slidingWindow,
      logitSoftcap: c.logitSoftcap,
    });
    const rows = { shape: [N, Hq, D], axes: ['n', 'hq', 'd'] };
    const heads = { shape: [N, Hq], axes: ['n', 'hq'] };
    checks.close('out vs CPU reference', out, refOut, ATTENTION_TOLERANCE[c.dtype], rows);
    checks.close('out vs f64 formulas', out, oracle.out, ATTENTION_TOLERANCE[c.dtype], rows);
    checks.close('lse vs CPU reference', lse, refLse, LSE_TOLERANCE[c.dtype], heads);
    checks.close('lse vs f64 formulas', lse, oracle.lse, LSE_TOLERANCE[c.dtype], heads);
    checks.exact('kPool, read only', kPool, valuesOf(spec, 'kPool'));
    checks.exact('vPool, read only', vPool, valuesOf(spec, 'vPool'));
    checks.done();
  } finally {
    s.dispose();
    r.dispose();
  }
}

/**
 * The destination pool `which` ('k' or 'v') after the copy, from the rule:
 * each pair's source rows as they were before the call (in place too), the
 * last pair naming a destination writing it; same dtype and scales keep the
 * stored values, anything else goes through f32 (times the source scale,
 * over the destination's) and is rounded once to the destination.
 */
export function copiedPool(c: CopyConfig, which: 'k' | 'v'): Float32Array {
  const spec = copySpec(c);
  const { H, D } = c;
  const src = c.src;
  const dst = copyDestination(c);
  const from = valuesOf(spec, `${which}Src`);
  const out = Float32Array.from(valuesOf(spec, `${which}Dst`));
  const srcScale = perHead(spec, `${which}SrcScale`, H);
  const dstScale = perHead(spec, `${which}DstScale`, H);
  for (const [f, t] of c.pairs) {
    if (f < 0 || t < 0) continue;
    for (let h = 0; h < H; h++) {
      const kept = src.dtype === dst.dtype && (!isFp8(src.dtype) || srcScale![h] === dstScale![h]);
      for (let d = 0; d < D; d++) {
        const stored = from[rowStart(src.layout ?? 'NHD', src.pageSize, H, D, f, h) + d]!;
        const at = rowStart(dst.layout ?? 'NHD', dst.pageSize, H, D, t, h) + d;
        if (kept) {
          out[at] = stored;
          continue;
        }
        const x = isFp8(src.dtype) ? Math.fround(stored * srcScale![h]!) : stored;
        out[at] = isFp8(dst.dtype) ? roundToPool([Math.fround(x / dstScale![h]!)], dst.dtype)[0]! : roundToPool([x], dst.dtype as FloatDType)[0]!;
      }
    }
  }
  return out;
}

export async function checkCopyCall(backend: Backend, reference: Backend, c: CopyConfig): Promise<void> {
  const spec = copySpec(c);
  const s = new Scope(backend);
  const r = new Scope(reference);
  const checks = new Checks('copySlots');
  try {
    const made = new Map<string, Tensor>();
    const refMade = new Map<string, Tensor>();
    untyped(backend).copySlots(buildArgs(s, spec, false, made));
    untyped(reference).copySlots(buildArgs(r, spec, false, refMade));
    await Promise.all([backend.sync(), reference.sync()]);
    const names = ['kDst', 'vDst', 'kSrc', 'vSrc'];
    const [kDst, vDst, kSrc, vSrc] = await Promise.all(names.map((name) => readFloats(backend, made.get(name)!)));
    const [refK, refV] = await Promise.all(names.slice(0, 2).map((name) => readFloats(reference, refMade.get(name)!)));
    const pairs = `pairs [${c.pairs.map(([f, t]) => `${f}->${t}`).join(', ')}]`;
    checks.exact(`kDst vs the rows of ${pairs}`, kDst!, copiedPool(c, 'k'));
    checks.exact(`vDst vs the rows of ${pairs}`, vDst!, copiedPool(c, 'v'));
    checks.exact('kDst vs CPU reference', kDst!, refK!);
    checks.exact('vDst vs CPU reference', vDst!, refV!);
    if (c.dst !== 'in place') {
      checks.exact('kSrc, read only', kSrc!, valuesOf(spec, 'kSrc'));
      checks.exact('vSrc, read only', vSrc!, valuesOf(spec, 'vSrc'));
    }
    checks.done();
  } finally {
    s.dispose();
    r.dispose();
  }
}
