/**
 * `writeLayerKv` must finish before it returns: its views are disposed right
 * after. An async callback is refused with KV044 after its first layer, and
 * the rejection its late work ends in (KV027) is not left unhandled.
 */
import type { Backend } from '@kvkit/contracts';
import { FIXTURE, Fixture } from './fixture.js';
import { Checks } from './tolerances.js';
import { readFloats } from './tensors.js';
import { contractErrorProblems, outcome } from './validation.js';

export async function checkAsyncWriteLayerKvRefused(backend: Backend, other: Backend): Promise<void> {
  const fx = new Fixture(backend, other);
  const checks = new Checks('an async writeLayerKv is refused with KV044');
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    const layers: number[] = [];
    let late: unknown;
    const got = await outcome(() =>
      fx.materializer.materialize({
        ctxHidden: fx.ctxHidden,
        positions: fx.positions4,
        writeLayerKv: async (layer: number, k: unknown) => {
          layers.push(layer);
          await null;
          // Too late: the view was disposed when the callback returned its promise.
          late = await backend.read(k as never).then(
            () => 'read',
            (e: { code?: string }) => e.code,
          );
          await backend.read(k as never);
        },
      }),
    );
    checks.that(got.error !== undefined && got.sync, `materialize with an async callback ${got.error === undefined ? 'succeeded' : 'rejected instead of throwing'}`);
    const wrong = contractErrorProblems(got.error, { code: 'KV044', op: 'KvMaterializer.materialize', arg: 'writeLayerKv', mentions: ['synchronous', 'backend.read'] });
    checks.that(wrong.length === 0, `the error: ${wrong.join('; ')} (${String((got.error as Error | undefined)?.message)})`);
    checks.that(layers.length === 1 && layers[0] === 0, `writeLayerKv ran for layers [${layers.join(', ')}]; expected [0] only`);
    // Let the callback's remaining work run and fail, then see that nothing was left unhandled.
    await new Promise((done) => setTimeout(done, 20));
    checks.that(late === 'KV027', `the callback's late read gave ${String(late)}; expected KV027 (its view was disposed)`);
    checks.that(unhandled.length === 0, `unhandled rejection(s): ${unhandled.map(String).join('; ')}`);
    // The backend carries on: a synchronous callback on the same materializer works.
    let seen = 0;
    const reads: Promise<Float32Array>[] = [];
    fx.materializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.positions4, writeLayerKv: (_: number, k: unknown) => { seen += 1; reads.push(readFloats(backend, k as never)); } });
    await backend.sync();
    const values = await Promise.all(reads);
    checks.that(seen === FIXTURE.L && values.every((v) => v.length === FIXTURE.T * FIXTURE.H * FIXTURE.D), `a synchronous callback afterwards ran ${seen} times`);
    checks.done();
  } finally {
    process.off('unhandledRejection', onUnhandled);
    fx.dispose();
  }
}
