/**
 * The part of Vitest's API the conformance suite uses, on `node:test`: the
 * GPU host has Node but no node_modules, so the suite is bundled with this
 * module standing in for `vitest`.
 */
import { after, before, describe as nodeDescribe, it as nodeIt } from 'node:test';

/** The part of Vitest's test context the suite uses: `ctx.skip(condition, note)` skips the rest of the case. */
interface Context {
  skip(condition?: boolean, note?: string): void;
}
type Body = (ctx: Context) => unknown;

export function describe(name: string, body: () => void): void {
  nodeDescribe(name, body);
}

/** Thrown by `ctx.skip` to end the case's body, as Vitest's does; the case is then reported skipped. */
class Skipped extends Error {}

export const it = Object.assign(
  (name: string, body: Body, timeout?: number) =>
    nodeIt(name, { timeout }, async (t) => {
      const ctx: Context = {
        skip(condition = true, note?: string) {
          if (!condition) return;
          t.skip(note);
          throw new Skipped();
        },
      };
      try {
        await body(ctx);
      } catch (e) {
        if (!(e instanceof Skipped)) throw e;
      }
    }),
  {
    skip: (name: string, _body: Body) => nodeIt(name, { skip: true }, () => {}),
  },
);

export function beforeAll(body: () => unknown, timeout?: number): void {
  before(async () => void (await body()), { timeout });
}

export function afterAll(body: () => unknown, timeout?: number): void {
  after(async () => void (await body()), { timeout });
}
