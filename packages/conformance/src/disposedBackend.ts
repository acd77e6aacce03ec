import type { Backend } from '@kvkit/contracts';
import { Fixture } from './fixture.js';
import { untyped } from './tensors.js';
import { contractErrorProblems, outcome } from './validation.js';

/** Calls whose answer comes as a promise: a disposed backend rejects them rather than throwing. */
const ASYNC_CALLS = new Set(['read', 'readBits', 'sync']);

/**
 * Disposes a fresh backend that holds valid arguments for every call, then makes each call: every one must be refused
 * with KV003 naming `this backend` and the call made (`sync` and `read` rejecting), and `dispose()` again must do
 * nothing. Returns what went wrong; empty when all is right.
 */
export async function disposedBackendProblems(create: () => Backend | Promise<Backend>, other: Backend): Promise<string[]> {
  const gone = await create();
  const fx = new Fixture(gone, other);
  const problems: string[] = [];
  try {
    const ops = untyped(gone);
    const { kOut, materializer } = fx;
    const fused = fx.fusedArgs();
    const rope = fx.ropeArgs();
    const created = fx.createArgs();
    const materialize = { ctxHidden: fx.ctxHidden, positions: fx.positions4, writeLayerKv: () => {} };
    const into = fx.intoArgs();
    const attention = fx.attentionArgs();
    const copy = fx.copyArgs();
    gone.dispose();
    const again = await outcome(() => gone.dispose());
    if (again.error !== undefined) problems.push(`a second dispose() threw: ${String(again.error)}`);
    const calls: [op: string, call: () => unknown][] = [
      ['tensor', () => gone.tensor('f32', [3], [0.5, -1.25, 2])],
      ['empty', () => gone.empty('bf16', [5])],
      ['tensorFromBits', () => gone.tensorFromBits('bf16', [2], Uint16Array.of(0x3f80, 0x7fc1))],
      ['read', () => gone.read(kOut)],
      ['readBits', () => gone.readBits(kOut)],
      ['fusedNormRopeStacked', () => ops.fusedNormRopeStacked(fused)],
      ['ropePoolFused', () => ops.ropePoolFused(rope)],
      ['createKvMaterializer', () => ops.createKvMaterializer(created)],
      ['KvMaterializer.materialize', () => materializer.materialize(materialize)],
      ['KvMaterializer.materializeInto', () => materializer.materializeInto(into)],
      // Refused before anything else, on a backend that does not run them yet too.
      ['pagedAttention', () => ops.pagedAttention(attention)],
      ['copySlots', () => ops.copySlots(copy)],
      ['sync', () => gone.sync()],
    ];
    for (const [op, call] of calls) {
      const got = await outcome(call);
      if (got.error === undefined) {
        problems.push(`${op} after dispose() succeeded`);
        continue;
      }
      if (got.sync === ASYNC_CALLS.has(op)) problems.push(`${op} after dispose() ${got.sync ? 'threw; it must reject' : 'rejected; it must throw'}`);
      const wrong = contractErrorProblems(got.error, { code: 'KV003', op, arg: 'this backend' });
      if (wrong.length > 0) problems.push(`${op} after dispose(): ${wrong.join('; ')} (message: ${(got.error as Error).message})`);
    }
  } finally {
    fx.dispose();
  }
  return problems;
}
