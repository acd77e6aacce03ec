/**
 * kvkit's main job, end to end: a draft model's K/V for every layer from one
 * projection plus fused RMSNorm and RoPE, written into a paged KV pool, on
 * the best backend found. Then a call with one position missing, and the
 * ContractError it raises, explained.
 */
import { ContractError, explain, formatEntry } from '@kvkit/errors-catalog';
import { chooseBackend } from './backends.js';
import { randomData } from './random.js';

const model = { layers: 4, kvHeads: 2, headDim: 64, rotaryDim: 64, hidden: 512, ropeBase: 1e6, eps: 1e-6 };
const tokens = 24;
const poolSlots = 64;
const dtype = 'bf16';

const { backend, reports } = await chooseBackend();
console.log('kvkit demo: materialise a draft model\'s K/V for every layer\n\nbackends found:');
for (const r of reports) console.log(`  ${r.kind.padEnd(7)} ${r.started ? 'started   ' : 'not here  '} ${r.found}`);
console.log(`using: ${backend.label}, the best backend found here\n`);

const { layers: L, kvHeads: H, headDim: D, hidden } = model;
const m = backend.createKvMaterializer({
  kvWeight: backend.tensor(dtype, [L, 2 * H * D, hidden], randomData(L * 2 * H * D * hidden, 1, 1 / Math.sqrt(hidden))),
  kNormWeight: backend.tensor(dtype, [L, D], randomData(L * D, 2, 0.2, 1)),
  eps: model.eps,
  numKvHeads: H,
  headDim: D,
  rotaryDim: model.rotaryDim,
  ropeBase: model.ropeBase,
  maxPositionHint: 4096,
});
const ctxHidden = backend.tensor(dtype, [tokens, hidden], randomData(tokens * hidden, 3));
const positions = backend.tensor('i64', [tokens], Array.from({ length: tokens }, (_, t) => 100 + t));

console.log(`model: L=${L} layers, H=${H} KV heads, D=${D}, rotary ${model.rotaryDim}, hidden ${hidden}, ${dtype}; ${tokens} context tokens at positions 100..${99 + tokens}`);
console.log('\nmaterialize: one projection for all layers, RMSNorm + RoPE on K, V passed through');
console.log('layer  K shape        K rms   V rms   K[t=0,h=0,0..3]');
const pending: Promise<void>[] = [];
const started = performance.now();
m.materialize({ ctxHidden, positions, writeLayerKv: (layer, k, v) => {
  // Views are valid only during the callback: read() observes the work enqueued so far.
  pending.push(
    Promise.all([backend.read(k), backend.read(v)]).then(([kd, vd]) => {
      const head = Array.from(kd.subarray(0, 4), (x) => x.toFixed(3).padStart(7)).join(' ');
      console.log(`${String(layer).padStart(5)}  [${k.shape.join(', ')}]   ${rms(kd).toFixed(3)}   ${rms(vd).toFixed(3)}  ${head}`);
    }),
  );
} });
await Promise.all(pending);
await backend.sync();
console.log(`(materialize and read back: ${(performance.now() - started).toFixed(1)} ms on ${backend.kind})`);

const kPool = backend.empty(dtype, [L, poolSlots, H, D]);
const vPool = backend.empty(dtype, [L, poolSlots, H, D]);
const slots = Array.from({ length: tokens }, (_, t) => (t % 8 === 7 ? -1 : 10 + t));
m.materializeInto({ ctxHidden, positions, kPool, vPool, slots: backend.tensor('i32', [tokens], slots) });
await backend.sync();
const pool = await backend.read(kPool);
const written = countRows(pool, L * poolSlots, H * D);
console.log(`\nmaterializeInto: pools [L=${L}, S=${poolSlots}, H=${H}, D=${D}]; ${slots.filter((s) => s >= 0).length} tokens written, ${slots.filter((s) => s < 0).length} skipped (slot -1); ${written} of ${L * poolSlots} pool rows now hold K`);

console.log('\nNow a call with one position missing (an off-by-one after a rollback):');
const short = backend.tensor('i64', [tokens - 1] as number[], Array.from({ length: tokens - 1 }, (_, t) => 100 + t));
try {
  m.materialize({ ctxHidden, positions: short, writeLayerKv: () => {} });
} catch (e) {
  if (!(e instanceof ContractError)) throw e;
  console.log(`\ncaught ContractError ${e.code}:\n  ${e.message}\n\n$ kvkit explain ${e.code}\n${formatEntry(explain(e.code)!)}`);
}
m.dispose();
backend.dispose();

function rms(x: Float32Array): number {
  let s = 0;
  for (const v of x) s += v * v;
  return Math.sqrt(s / Math.max(1, x.length));
}

function countRows(x: Float32Array, rows: number, width: number): number {
  let n = 0;
  for (let r = 0; r < rows; r++) if (x.subarray(r * width, (r + 1) * width).some((v) => v !== 0)) n++;
  return n;
}
