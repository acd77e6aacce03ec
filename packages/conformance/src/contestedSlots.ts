import type { Backend, FloatDType, IndexDType } from '@kvkit/contracts';
import { buildCosSinCache, randomValues, Rng, roundToDType, seedOf } from './data.js';
import { materializeAll, materializerOn } from './invariants.js';
import { Checks, RELATIVE_TOLERANCE } from './tolerances.js';
import { gatherRows, readFloats, Scope, untyped } from './tensors.js';

/**
 * The duplicate-slot rule of the contracts (`values(slots, { duplicates:
 * 'last' })`, SEMANTICS.md §3): of the tokens naming one slot in a call, the
 * last one's K and V rows land there, whole, on every backend. Hundreds of
 * tokens share each contested slot, so a backend that lets tokens race (rows
 * or heads from different tokens in one slot) or keeps the wrong one fails.
 */

/** Head shape of a case: an odd H*D (element-wise paths, half-word stores) or an even one (vector paths). */
export interface ContestedShape {
  readonly H: number;
  readonly D: number;
  readonly R: number;
  readonly slotDType: IndexDType;
}

export const CONTESTED_SHAPES: readonly ContestedShape[] = [
  { H: 3, D: 5, R: 4, slotDType: 'i64' },
  { H: 2, D: 8, R: 8, slotDType: 'i32' },
];

const TOKENS = 600;
/**
 * The calls' token counts for ropePoolFused: many, and a decode step's (a GPU backend may settle a small call's
 * duplicates inside its one kernel, a large one's in a pass ahead of it).
 */
export const CONTESTED_TOKENS: readonly number[] = [TOKENS, 200];
const POOL_SLOTS = 12;
const CONTESTED = [2, 7, 11];
const NAMED_ONCE = [0, 5, 9];
const SKIPS = [-1, -7, -1, -2, -100, -1];

/** `tokens` slots in random order: the contested ones about a third of the tokens each, three slots once, six skips. */
function contestedSlots(rng: Rng, tokens = TOKENS): number[] {
  const slots = [...NAMED_ONCE, ...SKIPS];
  while (slots.length < tokens) slots.push(CONTESTED[rng.int(CONTESTED.length)]!);
  for (let i = slots.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [slots[i], slots[j]] = [slots[j]!, slots[i]!];
  }
  return slots;
}

/** The token that must own each named slot: the last one naming it. */
function lastOwners(slots: readonly number[]): Map<number, number> {
  const owners = new Map<number, number>();
  slots.forEach((slot, n) => {
    if (slot >= 0) owners.set(slot, n);
  });
  return owners;
}

const describe = (c: ContestedShape) => `H=${c.H} D=${c.D} slots:${c.slotDType}`;

/** ropePoolFused: each contested slot holds exactly its last token's kRot and v rows; unnamed slots are untouched. */
export async function checkContestedSlotsRopePool(backend: Backend, dtype: FloatDType, shape: ContestedShape, tokens = TOKENS): Promise<void> {
  const { H, D, R, slotDType } = shape;
  const [N, S, Hq] = [tokens, POOL_SLOTS, 2 * shape.H];
  const s = new Scope(backend);
  const checks = new Checks(`ropePoolFused, ${N} tokens on ${CONTESTED.length} contested slots (${describe(shape)}) [${dtype}]`);
  try {
    const rng = new Rng(seedOf(`contested slots rope pool ${describe(shape)}${N === TOKENS ? '' : `, ${N} tokens`}`));
    const slots = contestedSlots(rng, N);
    const row = H * D;
    const kBefore = randomValues(rng, S * row);
    const vBefore = randomValues(rng, S * row);
    const kPool = s.float(dtype, [S, H, D], kBefore);
    const vPool = s.float(dtype, [S, H, D], vBefore);
    const v = s.float(dtype, [N, H, D], randomValues(rng, N * row));
    const out = untyped(backend).ropePoolFused({
      q: s.float(dtype, [N, Hq, D], randomValues(rng, N * Hq * D)),
      k: s.float(dtype, [N, H, D], randomValues(rng, N * row)),
      v,
      positions: s.index('i32', [N], Array.from({ length: N }, () => rng.int(4096))),
      slots: s.index(slotDType, [N], slots),
      kPool,
      vPool,
      numQoHeads: Hq,
      numKvHeads: H,
      headDim: D,
      rotaryDim: R,
      ropeBase: 10000,
    });
    s.track(out.qRot);
    s.track(out.kRot);
    await backend.sync();
    const [kRot, vIn, kAfter, vAfter] = await Promise.all([readFloats(backend, out.kRot), readFloats(backend, v), readFloats(backend, kPool), readFloats(backend, vPool)]);
    const [kHeld, vHeld] = [roundToDType(kBefore, dtype), roundToDType(vBefore, dtype)];
    const owners = lastOwners(slots);
    const named = [...owners.keys()].sort((a, b) => a - b);
    const layout = { shape: [named.length, H, D], axes: ['slot#', 'h', 'd'] };
    checks.exact(`kPool rows ${named.join(', ')} vs kRot of their last tokens`, gatherRows(kAfter, named, row), gatherRows(kRot, named.map((slot) => owners.get(slot)!), row), layout);
    checks.exact(`vPool rows ${named.join(', ')} vs v of their last tokens`, gatherRows(vAfter, named, row), gatherRows(vIn, named.map((slot) => owners.get(slot)!), row), layout);
    const unnamed = Array.from({ length: S }, (_, i) => i).filter((slot) => !owners.has(slot));
    checks.exact(`kPool rows ${unnamed.join(', ')} (named by no token) untouched`, gatherRows(kAfter, unnamed, row), gatherRows(kHeld, unnamed, row));
    checks.exact(`vPool rows ${unnamed.join(', ')} (named by no token) untouched`, gatherRows(vAfter, unnamed, row), gatherRows(vHeld, unnamed, row));
    checks.done();
  } finally {
    s.dispose();
  }
}

/**
 * materializeInto: the pools after the contested call are bit for bit the
 * pools after the same call with every token but each slot's last one
 * skipped, and those rows are the materialized rows of their last tokens.
 */
export async function checkContestedSlotsMaterializeInto(backend: Backend, dtype: FloatDType, shape: ContestedShape): Promise<void> {
  const { H, D, R, slotDType } = shape;
  const [T, S, L, hidden, P] = [TOKENS, POOL_SLOTS, 2, 12, 64];
  const s = new Scope(backend);
  const checks = new Checks(`materializeInto, ${T} tokens on ${CONTESTED.length} contested slots (${describe(shape)}) [${dtype}]`);
  try {
    const seed = `contested slots materializeInto ${describe(shape)}`;
    const m = s.owned(materializerOn(s, dtype, { L, H, D, R, hidden }, { cosSinCache: s.float('f32', [P, R], buildCosSinCache(P, R, 10000)) }, 1e-5, seed));
    const rng = new Rng(seedOf(`${seed} inputs`));
    const slots = contestedSlots(rng);
    const owners = lastOwners(slots);
    const ownersOnly = slots.map((slot, n) => (slot >= 0 && owners.get(slot) !== n ? -1 : slot));
    const ctxHidden = s.float(dtype, [T, hidden], randomValues(rng, T * hidden));
    const positions = s.index('i32', [T], Array.from({ length: T }, () => rng.int(P)));
    const row = H * D;
    const kBefore = randomValues(rng, L * S * row);
    const vBefore = randomValues(rng, L * S * row);
    const pools = () => [s.float(dtype, [L, S, H, D], kBefore), s.float(dtype, [L, S, H, D], vBefore)] as const;
    const [kPool, vPool] = pools();
    const [kOnly, vOnly] = pools();
    m.materializeInto({ ctxHidden, positions, kPool, vPool, slots: s.index(slotDType, [T], slots) });
    m.materializeInto({ ctxHidden, positions, kPool: kOnly, vPool: vOnly, slots: s.index(slotDType, [T], ownersOnly) });
    const flat = await materializeAll(backend, m, ctxHidden, positions);
    const [kAfter, vAfter, kWant, vWant] = await Promise.all([kPool, vPool, kOnly, vOnly].map((t) => readFloats(backend, t)));
    const [kHeld, vHeld] = [roundToDType(kBefore, dtype), roundToDType(vBefore, dtype)];
    const layout = { shape: [L, S, H, D], axes: ['l', 's', 'h', 'd'] };
    checks.exact('kPool vs the same call with only each slot\'s last token', kAfter!, kWant!, layout);
    checks.exact('vPool vs the same call with only each slot\'s last token', vAfter!, vWant!, layout);
    const poolRows: number[] = [];
    const viewRows: number[] = [];
    const untouched: number[] = [];
    for (let l = 0; l < L; l++) {
      for (let slot = 0; slot < S; slot++) {
        const owner = owners.get(slot);
        if (owner === undefined) untouched.push(l * S + slot);
        else {
          poolRows.push(l * S + slot);
          viewRows.push(l * T + owner);
        }
      }
    }
    const tol = RELATIVE_TOLERANCE[dtype];
    checks.close('kPool named rows vs materialize rows of their last tokens', gatherRows(kAfter!, poolRows, row), gatherRows(flat.k, viewRows, row), tol);
    checks.close('vPool named rows vs materialize rows of their last tokens', gatherRows(vAfter!, poolRows, row), gatherRows(flat.v, viewRows, row), tol);
    checks.exact('kPool rows named by no token untouched', gatherRows(kAfter!, untouched, row), gatherRows(kHeld, untouched, row));
    checks.exact('vPool rows named by no token untouched', gatherRows(vAfter!, untouched, row), gatherRows(vHeld, untouched, row));
    checks.done();
  } finally {
    s.dispose();
  }
}
