/**
 * The try-it page, built and served, in headless Chromium: once with WebGPU on (SwiftShader where there is no
 * GPU), where each op must match the CPU reference within the conformance tolerance of its dtype and report a
 * positive device time; and once in a browser that gives no adapter, where the page must fall back to the CPU
 * backend by its own detection (not a switch that skips it), saying why with the KV050 that createWebGpuBackend
 * throws there.
 */
import { existsSync } from 'node:fs';
import type { Server } from 'node:http';
import { ATTENTION_TOLERANCE, LSE_TOLERANCE, RELATIVE_TOLERANCE, ropeBaseTolerance } from '@kvkit/conformance';
import type { FloatDType } from '@kvkit/contracts';
import axe from 'axe-core';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { fileForPath, serveSite } from './support/site.js';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`docs try-it tests skipped: ${CHROMIUM} is not installed (Debian's chromium package provides it)`);

const COMMON_ARGS = ['--no-sandbox', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'];

/** The tolerance of each output the page compares, per op, for inputs of `dtype` (angles from ropeBase up to `maxPosition`). */
function tolerance(op: string, output: string, dtype: FloatDType, maxPosition: number): number {
  switch (op) {
    case 'fusedNormRopeStacked':
      return RELATIVE_TOLERANCE[dtype];
    case 'ropePoolFused':
    case 'KvMaterializer.materializeInto':
    case 'mlaPoolFused':
      return ropeBaseTolerance(dtype, maxPosition);
    case 'dequantizeKv':
      return 0; // decode(code) · scale in f32, rounded once: the same bits on every backend
    case 'pagedAttention':
      return output === 'lse' ? LSE_TOLERANCE[dtype] : ATTENTION_TOLERANCE[dtype];
    default:
      throw new Error(`no tolerance for ${op}`);
  }
}

/** What each op's mistake button must throw. */
const MISTAKES: Record<string, string> = {
  fusedNormRopeStacked: 'KV011',
  ropePoolFused: 'KV038',
  dequantizeKv: 'KV070',
  'KvMaterializer.materializeInto': 'KV023',
  pagedAttention: 'KV080',
  mlaPoolFused: 'KV090',
};

interface CardReport {
  op: string;
  state: string;
  backend?: string;
  timeUs: number;
  maxPosition: number;
  dtype: string;
  outputs: { name: string; relError: number }[];
  text: string;
}

describe.skipIf(!haveChromium)('the try-it page in Chromium', () => {
  const siteDir = inject('siteDir');
  const base = inject('siteBase');
  let server: Server;
  let origin: string;
  let withGpu: Browser;
  let withoutGpu: Browser;
  const problems: string[] = [];

  beforeAll(async () => {
    ({ server, origin } = await serveSite(siteDir, base));
    [withGpu, withoutGpu] = await Promise.all([
      chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--headless=new', '--enable-unsafe-webgpu', ...COMMON_ARGS] }),
      chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--disable-gpu', ...COMMON_ARGS] }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([withGpu?.close(), withoutGpu?.close()]);
    server?.close();
  });

  async function open(browser: Browser): Promise<Page> {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`${page.url()}: console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`${page.url()}: ${e.message}`));
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`${page.url()}: ${r.status()} ${r.url()}`);
    });
    await page.goto(`${origin}${base}try/`);
    await page.locator('[data-try][data-ready]').waitFor({ timeout: 60_000 });
    return page;
  }

  async function runAll(page: Page): Promise<CardReport[]> {
    await page.getByRole('button', { name: 'Run every op' }).click();
    await page.waitForFunction(() => [...document.querySelectorAll<HTMLElement>('[data-op]')].every((c) => !['idle', 'queued', 'running'].includes(c.dataset.state ?? '')), undefined, {
      timeout: 90_000,
    });
    return page.locator('[data-op]').evaluateAll((cards) =>
      (cards as HTMLElement[]).map((c) => ({
        op: c.dataset.op!,
        state: c.dataset.state!,
        backend: c.dataset.backend,
        timeUs: Number(c.dataset.timeUs),
        maxPosition: Number(c.dataset.maxPosition),
        dtype: c.dataset.dtype!,
        outputs: [...c.querySelectorAll<HTMLElement>('tr[data-output]')].map((r) => ({ name: r.dataset.output!, relError: Number(r.dataset.relError) })),
        text: c.querySelector('[data-result]')?.textContent ?? '',
      })),
    );
  }

  /** Clicks the op's mistake button; returns the code shown, the link's href and the line that says who threw it. */
  async function mistake(page: Page, op: string): Promise<{ code: string; href: string; where: string; message: string }> {
    const card = page.locator(`[data-op="${op}"]`);
    await card.getByRole('button', { name: /^Make a mistake/ }).click();
    const shown = card.locator('[data-mistake][data-code]');
    await shown.waitFor();
    const code = (await shown.getAttribute('data-code'))!;
    const href = (await shown.getByRole('link', { name: code, exact: true }).getAttribute('href'))!;
    return { code, href, where: (await shown.locator('p').first().textContent())!, message: (await shown.locator('pre').textContent())! };
  }

  it('runs every op on WebGPU and matches the CPU reference within each tolerance, with a positive device time', { timeout: 150_000 }, async () => {
    const page = await open(withGpu);
    await expect(page.locator('[data-try]').getAttribute('data-backend')).resolves.toBe('webgpu');
    await expect(page.locator('[data-backend-status]').textContent()).resolves.toMatch(/^Backend: WebGPU/);
    for (const dtype of ['f32', 'bf16'] as const) {
      await page.getByLabel('Dtype').selectOption(dtype);
      const cards = await runAll(page);
      expect(cards.map((c) => c.op)).toEqual(Object.keys(MISTAKES));
      for (const c of cards) {
        expect(c.state, `${c.op} ${dtype}: ${c.text}`).toBe('done');
        expect(c.backend).toBe('webgpu');
        expect(c.dtype).toBe(dtype);
        expect(c.outputs.length, c.op).toBeGreaterThan(0);
        for (const o of c.outputs) {
          expect(o.relError, `${c.op} ${o.name} (${dtype})`).toBeGreaterThanOrEqual(0);
          expect(o.relError, `${c.op} ${o.name} (${dtype})`).toBeLessThanOrEqual(tolerance(c.op, o.name, dtype, c.maxPosition));
        }
        expect(c.timeUs, c.op).toBeGreaterThan(0);
        expect(Number.isFinite(c.timeUs), c.op).toBe(true);
        // The time is labelled with how it was measured.
        expect(c.text).toMatch(/device time from timestamp queries|wall time per call/);
      }
      console.log(`try-it page, WebGPU, ${dtype}: ${cards.map((c) => `${c.op} ${Math.max(...c.outputs.map((o) => o.relError)).toExponential(1)} in ${c.timeUs.toFixed(0)} µs`).join('; ')}`);
    }
    await page.close();
  });

  it("shows each mistake's ContractError, its code linked to the built error page; a slot past the pool is found on the device, at sync()", { timeout: 90_000 }, async () => {
    const page = await open(withGpu);
    for (const [op, expected] of Object.entries(MISTAKES)) {
      const shown = await mistake(page, op);
      expect(shown.code, op).toBe(expected);
      expect(shown.href).toBe(`${origin}${base}errors/${expected.toLowerCase()}/`);
      expect(fileForPath(siteDir, `errors/${expected.toLowerCase()}/`), `${shown.href} is built`).toBeDefined();
      expect(shown.message.startsWith(`[${expected}] `), shown.message).toBe(true);
      expect(shown.message).toContain(`See ${shown.href} or run npx kvkit explain ${expected}`);
    }
    // Slots live on the device: WebGPU checks them in a dispatch of its own, and the next sync throws.
    expect((await mistake(page, 'ropePoolFused')).where).toMatch(/^await backend\.sync\(\) after ropePoolFused/);
    expect((await mistake(page, 'fusedNormRopeStacked')).where).toMatch(/^fusedNormRopeStacked, called with/);
    // The link opens the code's page.
    await Promise.all([page.waitForURL(`**${base}errors/kv011/`), page.locator('[data-op="fusedNormRopeStacked"] [data-mistake]').getByRole('link', { name: 'KV011', exact: true }).click()]);
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toContain('KV011');
    await page.close();
  });

  it("reports bad shapes with kvkit's own ContractError and marks the field", { timeout: 60_000 }, async () => {
    const page = await open(withGpu);
    const card = page.locator('[data-op="ropePoolFused"]');
    const rejected = async (field: string, value: string) => {
      await page.getByLabel(field, { exact: true }).fill(value);
      await card.getByRole('button', { name: 'Run ropePoolFused' }).click();
      await page.waitForFunction(() => !['idle', 'running'].includes(document.querySelector<HTMLElement>('[data-op="ropePoolFused"]')!.dataset.state!));
      expect(await card.getAttribute('data-state')).toBe('rejected');
      return card.locator('[data-result] [data-code]').getAttribute('data-code');
    };
    await expect(rejected('Head dim', '7')).resolves.toBe('KV007');
    await expect(page.getByLabel('Head dim', { exact: true }).getAttribute('aria-invalid')).resolves.toBe('true');
    await page.getByLabel('Head dim', { exact: true }).fill('64');
    await expect(rejected('Query heads', '3')).resolves.toBe('KV037');
    await expect(page.getByLabel('Query heads', { exact: true }).getAttribute('aria-invalid')).resolves.toBe('true');
    await expect(page.getByLabel('Head dim', { exact: true }).getAttribute('aria-invalid')).resolves.toBeNull();
    await expect(rejected('Query heads', '2.5')).resolves.toBe('KV040');
    // Past the page's own bounds nothing runs, and the message says the bound is the page's, not kvkit's.
    await page.getByLabel('Query heads', { exact: true }).fill('4');
    await page.getByLabel('Tokens', { exact: true }).fill('100000');
    await page.getByRole('button', { name: 'Run every op' }).click();
    await expect(page.getByRole('alert').filter({ hasText: 'This page runs at most' }).textContent()).resolves.toContain('kvkit has none of these');
    await page.close();
  });

  it('falls back to the CPU backend where the browser gives no WebGPU adapter, saying why (KV050); its results pass axe-core', { timeout: 90_000 }, async () => {
    const page = await open(withoutGpu);
    // The premise: this browser really has no adapter, so the fallback below is the page's own detection at work.
    await expect(page.evaluate(async () => (navigator.gpu ? (await navigator.gpu.requestAdapter()) !== null : false))).resolves.toBe(false);
    await expect(page.locator('[data-try]').getAttribute('data-backend')).resolves.toBe('cpu');
    await expect(page.locator('[data-backend-status]').textContent()).resolves.toMatch(/^Backend: the CPU backend/);
    const why = page.locator('[data-backend-why][data-code]');
    await expect(why.getAttribute('data-code')).resolves.toBe('KV050');
    await expect(why.getByRole('link', { name: 'KV050', exact: true }).getAttribute('href')).resolves.toBe(`${origin}${base}errors/kv050/`);
    for (const c of await runAll(page)) {
      expect(c.state, `${c.op}: ${c.text}`).toBe('done');
      expect(c.backend).toBe('cpu');
      for (const o of c.outputs) expect(o.relError, `${c.op} ${o.name}`).toBe(0);
      expect(c.timeUs, c.op).toBeGreaterThan(0);
      expect(c.text).toContain('wall time of the call and await backend.sync() on the CPU backend');
    }
    // On the CPU, slots are on the host: the call itself throws.
    const shown = await mistake(page, 'ropePoolFused');
    expect(shown.code).toBe('KV038');
    expect(shown.where).toMatch(/^ropePoolFused, called with/);
    for (const op of Object.keys(MISTAKES)) if (op !== 'ropePoolFused') await mistake(page, op);

    // With every result and every mistake shown: no serious or critical axe finding, in both themes and on a phone.
    await page.addScriptTag({ content: axe.source });
    const findings = async (where: string) => {
      const found = await page.evaluate(async () => {
        const run = await (window as unknown as { axe: typeof axe }).axe.run(document, { resultTypes: ['violations'] });
        return run.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
      });
      return found.map((f) => `${where}: ${f}`);
    };
    const found = await findings('light, 1280 px');
    await page.evaluate(() => {
      document.documentElement.dataset.theme = 'dark';
    });
    found.push(...(await findings('dark, 1280 px')));
    await page.evaluate(() => {
      document.documentElement.dataset.theme = 'light';
    });
    await page.setViewportSize({ width: 390, height: 844 });
    found.push(...(await findings('light, 390 px')));
    expect(found, found.join('\n')).toEqual([]);
    await expect(page.evaluate(() => document.documentElement.scrollWidth)).resolves.toBeLessThanOrEqual(390);
    await page.close();
  });

  it('logged no console error, uncaught exception or failed request', () => {
    expect(problems, problems.join('\n')).toEqual([]);
  });
});
