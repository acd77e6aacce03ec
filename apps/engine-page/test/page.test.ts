/**
 * The engine page, built with Vite, served, and run in headless Chromium on
 * its WebGPU (SwiftShader where there is no GPU). Its results are compared
 * with the CPU reference run in Node on exactly the projection bits the page
 * exported: the K/V cache rows it wrote, the rows it left alone, and qRot/kRot.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compare, ropeBaseTolerance, RELATIVE_TOLERANCE } from '@kvkit/conformance';
import type { Tensor } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { type Browser, chromium } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CACHE_ELEMENTS, QKV_WIDTH, randomFloats, SCENARIO } from '../src/scenario.js';
import type { EngineStepReport, EngineStepResult } from '../src/scenario.js';
import { servePage } from './support/serve.js';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`engine-page test skipped: ${CHROMIUM} is not installed (Debian's chromium package; scripts/setup.sh installs it)`);

const appRoot = fileURLToPath(new URL('..', import.meta.url));
const { tokens: N, hidden, numQoHeads: Hq, numKvHeads: H, headDim: D, slotsInCache: S } = SCENARIO;

const floats = (bits: readonly number[]) => new Float32Array(Uint32Array.from(bits).buffer);

/** Columns `[from, from + width)` of each row of the fused projection, as a contiguous copy. */
function columns(qkv: Float32Array, from: number, width: number): Float32Array {
  const out = new Float32Array(N * width);
  for (let n = 0; n < N; n++) out.set(qkv.subarray(n * QKV_WIDTH + from, n * QKV_WIDTH + from + width), n * width);
  return out;
}

/** The slot rows `[H, D]` of a `[S, H, D]` cache, flat. */
function rows(cache: Float32Array, slots: readonly number[]): Float32Array {
  const row = H * D;
  return Float32Array.from(slots.flatMap((s) => [...cache.subarray(s * row, (s + 1) * row)]));
}

/** ropePoolFused on the CPU reference, on owned contiguous copies of the page's inputs. */
async function reference(qkvBits: readonly number[]) {
  const cpu = createCpuBackend();
  const qkv = floats(qkvBits);
  const { rotaryDim, ropeStyle, ropeBase, seeds } = SCENARIO;
  const kPool = cpu.tensor('f32', [S, H, D], randomFloats(seeds.kCache, CACHE_ELEMENTS));
  const vPool = cpu.tensor('f32', [S, H, D], randomFloats(seeds.vCache, CACHE_ELEMENTS));
  const { qRot, kRot } = cpu.ropePoolFused({
    q: cpu.tensor('f32', [N, Hq, D], columns(qkv, 0, Hq * D)),
    k: cpu.tensor('f32', [N, H, D], columns(qkv, Hq * D, H * D)),
    v: cpu.tensor('f32', [N, H, D], columns(qkv, (Hq + H) * D, H * D)),
    positions: cpu.tensor('i32', [N], SCENARIO.positions),
    slots: cpu.tensor('i32', [N], SCENARIO.slots),
    kPool,
    vPool,
    numQoHeads: Hq,
    numKvHeads: H,
    headDim: D,
    rotaryDim,
    ropeStyle,
    ropeBase,
  });
  const read = async (t: Tensor<'f32'>) => cpu.read(t);
  const out = { qRot: await read(qRot), kRot: await read(kRot), kCache: await read(kPool), vCache: await read(vPool) };
  cpu.dispose();
  return out;
}

describe.skipIf(!haveChromium)('the engine page in headless Chromium', () => {
  let outDir: string;
  let profile: string;
  let server: Server | undefined;
  let origin: string;
  let browser: Browser | undefined;

  beforeAll(async () => {
    outDir = mkdtempSync(join(tmpdir(), 'kvkit-engine-page-'));
    await build({ root: appRoot, mode: 'production', logLevel: 'warn', build: { outDir, emptyOutDir: true } });
    ({ server, origin } = await servePage(outDir));
    profile = mkdtempSync(join(tmpdir(), 'kvkit-engine-chromium-'));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless=new', '--no-sandbox', '--enable-unsafe-webgpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });

  afterAll(async () => {
    await browser?.close();
    server?.close();
    if (outDir) rmSync(outDir, { recursive: true, force: true });
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it('writes the K/V cache rows the CPU reference writes, from views of its own buffers, reading back only at the end', async () => {
    const page = await browser!.newPage();
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`${r.status()} ${r.url()}`);
    });
    await page.goto(`${origin}/`);
    await page.waitForFunction(() => (window as { engineStep?: unknown }).engineStep !== undefined, undefined, { timeout: 120_000 });
    const result = (await page.evaluate(() => (window as { engineStep?: unknown }).engineStep)) as EngineStepResult;
    await page.close();
    expect(problems).toEqual([]);
    if (!result.ok) throw new Error(`the page failed${result.code ? ` with ${result.code}` : ''}: ${result.error}`);
    const got: EngineStepReport = result;
    console.log(`engine page: ropePoolFused on ${got.adapter} (${got.backend})`);

    // kvkit worked in the engine's buffers: q, k, v strided views of the fused projection, the caches wrapped in place.
    const at = SCENARIO.byteOffsets;
    expect(got.views).toEqual([
      { name: 'q', inEngineBuffer: true, byteOffset: at.qkv, strides: [QKV_WIDTH, D, 1] },
      { name: 'k', inEngineBuffer: true, byteOffset: at.qkv + 4 * Hq * D, strides: [QKV_WIDTH, D, 1] },
      { name: 'v', inEngineBuffer: true, byteOffset: at.qkv + 4 * (Hq + H) * D, strides: [QKV_WIDTH, D, 1] },
      { name: 'kPool', inEngineBuffer: true, byteOffset: at.kCache, strides: [H * D, D, 1] },
      { name: 'vPool', inEngineBuffer: true, byteOffset: at.vCache, strides: [H * D, D, 1] },
    ]);
    // The call wrote the engine's caches, so it submitted its work before it returned: the page never calls flush().
    expect(got.submitsByCall).toBe(1);

    // The page's own projection is what it claims: the seeded hidden states times the seeded weights.
    const x = randomFloats(SCENARIO.seeds.hidden, N * hidden);
    const w = randomFloats(SCENARIO.seeds.weight, QKV_WIDTH * hidden);
    const projection = Float64Array.from({ length: N * QKV_WIDTH }, (_, i) => {
      const [n, o] = [Math.floor(i / QKV_WIDTH), i % QKV_WIDTH];
      let sum = 0;
      for (let j = 0; j < hidden; j++) sum += x[n * hidden + j]! * w[o * hidden + j]!;
      return sum;
    });
    const checks = [compare('qkv projection', floats(got.qkvBits), projection, RELATIVE_TOLERANCE.f32)];

    const want = await reference(got.qkvBits);
    const kCache = floats(got.kCacheBits);
    const vCache = floats(got.vCacheBits);
    const slots: readonly number[] = SCENARIO.slots;
    const written = [...new Set(slots.filter((s) => s >= 0))];
    const untouched = Array.from({ length: S }, (_, s) => s).filter((s) => !written.includes(s));
    expect(untouched.length).toBeGreaterThan(0);
    // Angles from ropeBase may be computed in f32 on the device (conformance's documented tolerance).
    const rope = ropeBaseTolerance('f32', Math.max(...SCENARIO.positions));
    const layout = { shape: [written.length, H, D], axes: ['slot', 'h', 'd'] };
    checks.push(
      compare('vCache, every row (copies of v, and rows left alone)', vCache, want.vCache, 'bit-exact', { shape: [S, H, D], axes: ['slot', 'h', 'd'] }),
      compare('kCache rows no token names', rows(kCache, untouched), rows(want.kCache, untouched), 'bit-exact'),
      compare('kCache rows written (slot 2 contested, the last token writes it)', rows(kCache, written), rows(want.kCache, written), rope, layout),
      compare('qRot', floats(got.qRotBits), want.qRot, rope, { shape: [N, Hq, D], axes: ['n', 'h', 'd'] }),
      compare('kRot', floats(got.kRotBits), want.kRot, rope, { shape: [N, H, D], axes: ['n', 'h', 'd'] }),
    );
    console.log(`engine page vs CPU reference, relative error: ${checks.map((c) => c.message.split(':')[0] + ' ' + c.error.toExponential(2)).join('; ')}`);
    expect(checks.filter((c) => !c.ok).map((c) => c.message)).toEqual([]);
    // Those rows really changed: a page that wrote nothing would fail the checks above, not pass them by luck.
    expect(rows(kCache, written)).not.toEqual(rows(randomFloats(SCENARIO.seeds.kCache, CACHE_ELEMENTS), written));
  });
});
