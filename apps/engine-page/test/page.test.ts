/**
 * The engine page, built with Vite, served, and run in headless Chromium on
 * its WebGPU (SwiftShader where there is no GPU). Its results are compared
 * with the CPU reference run in Node on exactly the bits the page exported:
 * each step's K/V cache rows and qRot/kRot against ropePoolFused on the
 * step's projection, the fork against the rows copied, each step's
 * attention against the CPU's pagedAttention on the page's own queries and
 * caches, and the wrong calls' codes and the buffer they left alone.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ATTENTION_TOLERANCE, compare, LSE_TOLERANCE, RELATIVE_TOLERANCE, ropeBaseTolerance } from '@kvkit/conformance';
import type { Comparison } from '@kvkit/conformance';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { type Browser, chromium } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CACHE_ELEMENTS, FORK, PATTERN, plan, QKV_WIDTH, randomFloats, SCENARIO, SLOTS } from '../src/scenario.js';
import type { EngineRunReport, EngineRunResult, StepPlan } from '../src/scenario.js';
import { servePage } from './support/serve.js';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`engine-page test skipped: ${CHROMIUM} is not installed (Debian's chromium package; scripts/setup.sh installs it)`);

const appRoot = fileURLToPath(new URL('..', import.meta.url));
const { hidden, numQoHeads: Hq, numKvHeads: H, headDim: D } = SCENARIO;
const { steps, fork } = plan();
const ROW = H * D;
const cacheLayout = { shape: [SLOTS, H, D], axes: ['slot', 'h', 'd'] };

const floats = (bits: readonly number[]) => new Float32Array(Uint32Array.from(bits).buffer);

/** Columns `[from, from + width)` of each of the first `n` rows of the fused projection, as a contiguous copy. */
function columns(qkv: Float32Array, n: number, from: number, width: number): Float32Array {
  const out = new Float32Array(n * width);
  for (let t = 0; t < n; t++) out.set(qkv.subarray(t * QKV_WIDTH + from, t * QKV_WIDTH + from + width), t * width);
  return out;
}

/** The slot rows `[H, D]` of a `[S, H, D]` cache, flat. */
function rows(cache: Float32Array, slots: readonly number[]): Float32Array {
  return Float32Array.from(slots.flatMap((s) => [...cache.subarray(s * ROW, (s + 1) * ROW)]));
}

/** ropePoolFused of a step on the CPU reference, on owned contiguous copies of the page's projection and the caches as they were before it. */
async function ropeReference(p: StepPlan, qkvBits: readonly number[], kBefore: Float32Array, vBefore: Float32Array) {
  const cpu = createCpuBackend();
  const qkv = floats(qkvBits);
  const N = p.tokens;
  const kPool = cpu.tensor('f32', [SLOTS, H, D], kBefore);
  const vPool = cpu.tensor('f32', [SLOTS, H, D], vBefore);
  const { qRot, kRot } = cpu.ropePoolFused({
    q: cpu.tensor('f32', [N, Hq, D], columns(qkv, N, 0, Hq * D)),
    k: cpu.tensor('f32', [N, H, D], columns(qkv, N, Hq * D, H * D)),
    v: cpu.tensor('f32', [N, H, D], columns(qkv, N, (Hq + H) * D, H * D)),
    positions: cpu.tensor('i32', [N], p.positions),
    slots: cpu.tensor('i32', [N], p.slots),
    kPool,
    vPool,
    numQoHeads: Hq,
    numKvHeads: H,
    headDim: D,
    rotaryDim: SCENARIO.rotaryDim,
    ropeStyle: SCENARIO.ropeStyle,
    ropeBase: SCENARIO.ropeBase,
  });
  const out = { qRot: await cpu.read(qRot), kRot: await cpu.read(kRot), kCache: await cpu.read(kPool), vCache: await cpu.read(vPool) };
  cpu.dispose();
  return out;
}

/** pagedAttention on the CPU reference over the page's own queries (qRot's real rows) and its caches after the step. */
async function attentionReference(p: StepPlan, qRotBits: readonly number[], kCache: Float32Array, vCache: Float32Array, kvSlots = p.kvSlots) {
  const cpu = createCpuBackend();
  const index = (values: readonly number[]) => cpu.tensor('i32', [values.length], values);
  const { out, lse } = cpu.pagedAttention({
    q: cpu.tensor('f32', [p.queries, Hq, D], floats(qRotBits).subarray(0, p.queries * Hq * D)),
    kPool: cpu.tensor('f32', [SLOTS, H, D], kCache),
    vPool: cpu.tensor('f32', [SLOTS, H, D], vCache),
    qIndptr: index(p.qIndptr),
    kvIndptr: index(p.kvIndptr),
    kvSlots: index(kvSlots),
    numQoHeads: Hq,
    numKvHeads: H,
    headDim: D,
  });
  const result = { out: await cpu.read(out), lse: await cpu.read(lse) };
  cpu.dispose();
  return result;
}

function failures(checks: readonly Comparison[]): string[] {
  return checks.filter((c) => !c.ok).map((c) => c.message);
}

describe.skipIf(!haveChromium)('the engine page in headless Chromium', () => {
  let outDir: string;
  let server: Server | undefined;
  let browser: Browser | undefined;
  let got: EngineRunReport;
  let shown = '';
  const problems: string[] = [];

  beforeAll(async () => {
    outDir = mkdtempSync(join(tmpdir(), 'kvkit-engine-page-'));
    await build({ root: appRoot, mode: 'production', logLevel: 'warn', build: { outDir, emptyOutDir: true } });
    const served = await servePage(outDir);
    server = served.server;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless=new', '--no-sandbox', '--enable-unsafe-webgpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const page = await browser.newPage();
    page.on('pageerror', (e) => problems.push(e.message));
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`${r.status()} ${r.url()}`);
    });
    await page.goto(`${served.origin}/`);
    await page.waitForFunction(() => (window as { engineRun?: unknown }).engineRun !== undefined, undefined, { timeout: 120_000 });
    const result = (await page.evaluate(() => (window as { engineRun?: unknown }).engineRun)) as EngineRunResult;
    shown = (await page.textContent('#report')) ?? '';
    await page.close();
    if (!result.ok) throw new Error(`the page failed${result.code ? ` with ${result.code}` : ''}: ${result.error}`);
    got = result;
    console.log(`engine page on ${got.adapter} (${got.backend}):\n${shown}`);
  });

  afterAll(async () => {
    await browser?.close();
    server?.close();
    if (outDir) rmSync(outDir, { recursive: true, force: true });
  });

  it('runs without page errors, on views of its own buffers, each kvkit call submitting its work before it returns', () => {
    expect(problems).toEqual([]);
    // q, k, v strided views of the fused projection, the caches and the attention output wrapped in place.
    const at = SCENARIO.byteOffsets;
    expect(got.views).toEqual([
      { name: 'q', inEngineBuffer: true, byteOffset: at.qkv, strides: [QKV_WIDTH, D, 1] },
      { name: 'k', inEngineBuffer: true, byteOffset: at.qkv + 4 * Hq * D, strides: [QKV_WIDTH, D, 1] },
      { name: 'v', inEngineBuffer: true, byteOffset: at.qkv + 4 * (Hq + H) * D, strides: [QKV_WIDTH, D, 1] },
      { name: 'kPool', inEngineBuffer: true, byteOffset: at.kCache, strides: [H * D, D, 1] },
      { name: 'vPool', inEngineBuffer: true, byteOffset: at.vCache, strides: [H * D, D, 1] },
      { name: 'out', inEngineBuffer: true, byteOffset: at.out, strides: [Hq * D, D, 1] },
    ]);
    // Each call read or wrote the engine's buffers, so it submitted its work before it returned: the page never calls flush().
    expect(got.steps.map((s) => s.submits)).toEqual(steps.map(() => ({ ropePoolFused: 1, pagedAttention: 1 })));
    expect(got.fork.submits).toBe(1);
  });

  it("writes each step's K/V rows as the CPU reference's ropePoolFused does, from its own projection", async () => {
    const w = randomFloats(SCENARIO.seeds.weight, QKV_WIDTH * hidden);
    let kBefore = randomFloats(SCENARIO.seeds.kCache, CACHE_ELEMENTS);
    let vBefore = randomFloats(SCENARIO.seeds.vCache, CACHE_ELEMENTS);
    const messages: string[] = [];
    for (const [i, p] of steps.entries()) {
      if (i === 1) [kBefore, vBefore] = [floats(got.fork.kCacheBits), floats(got.fork.vCacheBits)];
      const step = got.steps[i]!;
      const at = `step ${i + 1}`;
      // The page's own projection is what it claims: the step's seeded hidden states times the seeded weights.
      const x = randomFloats(SCENARIO.seeds.hidden[i]!, p.tokens * hidden);
      const projection = Float64Array.from({ length: p.tokens * QKV_WIDTH }, (_, j) => {
        const [n, o] = [Math.floor(j / QKV_WIDTH), j % QKV_WIDTH];
        let sum = 0;
        for (let h = 0; h < hidden; h++) sum += x[n * hidden + h]! * w[o * hidden + h]!;
        return sum;
      });
      const want = await ropeReference(p, step.qkvBits, kBefore, vBefore);
      const kCache = floats(step.kCacheBits);
      const written = p.slots.filter((s) => s >= 0);
      const untouched = Array.from({ length: SLOTS }, (_, s) => s).filter((s) => !written.includes(s));
      const rope = ropeBaseTolerance('f32', Math.max(...p.positions));
      const checks = [
        compare(`${at}: qkv projection`, floats(step.qkvBits), projection, RELATIVE_TOLERANCE.f32),
        compare(`${at}: vCache, every row (copies of v, and rows left alone)`, floats(step.vCacheBits), want.vCache, 'bit-exact', cacheLayout),
        compare(`${at}: kCache rows no token names (the padding token's slot -1 included)`, rows(kCache, untouched), rows(want.kCache, untouched), 'bit-exact'),
        compare(`${at}: kCache rows written, slots ${written.join(', ')}`, rows(kCache, written), rows(want.kCache, written), rope),
        compare(`${at}: qRot`, floats(step.qRotBits), want.qRot, rope, { shape: [p.tokens, Hq, D], axes: ['n', 'h', 'd'] }),
        compare(`${at}: kRot`, floats(step.kRotBits), want.kRot, rope, { shape: [p.tokens, H, D], axes: ['n', 'h', 'd'] }),
      ];
      console.log(`${at} vs CPU reference, relative error: ${checks.map((c) => c.message.split(':')[1]!.trim() + ' ' + c.error.toExponential(2)).join('; ')}`);
      messages.push(...failures(checks));
      // Those rows really changed: a page that wrote nothing would fail the checks above, not pass them by luck.
      expect(rows(kCache, written), at).not.toEqual(rows(kBefore, written));
    }
    expect(messages).toEqual([]);
  });

  it(`forks ${FORK.name} from ${FORK.from} with copySlots: the rows of ${FORK.from}'s last page copied bit for bit, nothing else changed, and ${FORK.from}'s rows left alone by ${FORK.name}'s next token`, () => {
    const [k1, v1] = [floats(got.steps[0]!.kCacheBits), floats(got.steps[0]!.vCacheBits)];
    const [kf, vf] = [floats(got.fork.kCacheBits), floats(got.fork.vCacheBits)];
    const copied = (before: Float32Array) => {
      const out = Float32Array.from(before);
      fork.fromSlots.forEach((from, i) => {
        out.set(before.subarray(from * ROW, (from + 1) * ROW), fork.toSlots[i]! * ROW);
      });
      return out;
    };
    const [k2, v2] = [floats(got.steps[1]!.kCacheBits), floats(got.steps[1]!.vCacheBits)];
    const messages = failures([
      compare('kCache after the fork', kf, copied(k1), 'bit-exact', cacheLayout),
      compare('vCache after the fork', vf, copied(v1), 'bit-exact', cacheLayout),
      compare(`${FORK.from}'s copied K rows after step 2`, rows(k2, fork.fromSlots), rows(k1, fork.fromSlots), 'bit-exact'),
      compare(`${FORK.name}'s K copies after step 2`, rows(k2, fork.toSlots), rows(k1, fork.fromSlots), 'bit-exact'),
      compare(`${FORK.from}'s copied V rows after step 2`, rows(v2, fork.fromSlots), rows(v1, fork.fromSlots), 'bit-exact'),
      compare(`${FORK.name}'s V copies after step 2`, rows(v2, fork.toSlots), rows(v1, fork.fromSlots), 'bit-exact'),
    ]);
    expect(messages).toEqual([]);
    // The two requests went on differently: each wrote its next token in its own page.
    const [a, d] = [steps[1]!.requests.find((r) => r.name === FORK.from)!, steps[1]!.requests.find((r) => r.name === FORK.name)!];
    expect(a.slots.slice(0, -1).filter((s) => !fork.fromSlots.includes(s))).toEqual(d.slots.slice(0, -1).filter((s) => !fork.toSlots.includes(s)));
    expect(a.slots.at(-1)).not.toBe(d.slots.at(-1));
  });

  it("attends over each request's slots as the CPU reference's pagedAttention does on the page's own queries and caches (GQA, causal, requests of different lengths)", async () => {
    const messages: string[] = [];
    for (const [i, p] of steps.entries()) {
      const step = got.steps[i]!;
      const [kCache, vCache] = [floats(step.kCacheBits), floats(step.vCacheBits)];
      const want = await attentionReference(p, step.qRotBits, kCache, vCache);
      const at = `step ${i + 1} (${p.requests.map((r) => `${r.name}: ${r.queries} of ${r.cached}`).join(', ')})`;
      const checks = [
        compare(`${at}: out`, floats(step.outBits), want.out, ATTENTION_TOLERANCE.f32, { shape: [p.queries, Hq, D], axes: ['n', 'hq', 'd'] }),
        compare(`${at}: lse`, floats(step.lseBits), want.lse, LSE_TOLERANCE.f32, { shape: [p.queries, Hq], axes: ['n', 'hq'] }),
      ];
      if (i === 1) {
        // The fork's copies are faithful: reading A's original rows where D reads its copies gives D's output.
        const original = p.kvSlots.map((s) => (fork.toSlots.includes(s) ? fork.fromSlots[fork.toSlots.indexOf(s)]! : s));
        const shared = await attentionReference(p, step.qRotBits, kCache, vCache, original);
        checks.push(compare(`${at}: out, ${FORK.name} reading ${FORK.from}'s rows instead of its copies`, floats(step.outBits), shared.out, ATTENTION_TOLERANCE.f32));
      }
      console.log(`${at} vs CPU reference, relative error: ${checks.map((c) => c.error.toExponential(2)).join(', ')}`);
      messages.push(...failures(checks));
    }
    expect(messages).toEqual([]);
  });

  it('shows the code of each wrong call (a slot outside the pool at sync, a short kvIndptr at the call) and writes nothing into the buffer it was given', () => {
    expect(got.wrongCalls).toMatchObject([
      { code: 'KV080', when: 'sync', message: expect.stringContaining(`kvSlots[${steps.at(-1)!.kvSlots.length - 1}] = ${SLOTS}`) },
      { code: 'KV077', when: 'call', message: expect.stringContaining('kvIndptr') },
    ]);
    const last = steps.at(-1)!;
    expect(floats(got.wrongOutBits)).toEqual(new Float32Array(last.queries * Hq * D).fill(PATTERN));
    expect(shown).toContain('KV080 reported by the next sync()');
    expect(shown).toContain('KV077 thrown by the call');
    expect(shown).toContain('is unchanged');
  });
});
