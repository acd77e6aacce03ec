/**
 * The part of Vitest's API the conformance suite uses, on `node:test`: the
 * GPU host has Node but no node_modules, so the suite is bundled with this
 * module standing in for `vitest`.
 */
import { after, before, describe as nodeDescribe, it as nodeIt } from 'node:test';

type Body = () => unknown;

export function describe(name: string, body: () => void): void {
  nodeDescribe(name, body);
}

export const it = Object.assign((name: string, body: Body, timeout?: number) => nodeIt(name, { timeout }, async () => void (await body())), {
  skip: (name: string, body: Body) => nodeIt(name, { skip: true }, async () => void (await body())),
});

export function beforeAll(body: Body, timeout?: number): void {
  before(async () => void (await body()), { timeout });
}

export function afterAll(body: Body, timeout?: number): void {
  after(async () => void (await body()), { timeout });
}
