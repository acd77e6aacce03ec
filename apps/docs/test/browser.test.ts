import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isContractError, setDocsBase } from '@kvkit/errors-catalog';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { docsRoot, serveSite } from './support/site.js';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`docs browser tests skipped: ${CHROMIUM} is not installed (Debian's chromium package provides it)`);

const SECTIONS = ['Error message', 'What it means', 'Source', 'Solutions', 'Example fix', 'When it happens', 'Related errors'];

/** Calls that break a contract on the CPU reference backend; each returns the ContractError it throws. */
function realErrors(): { code: string; message: string }[] {
  const b = createCpuBackend();
  // Typed as number: with literal dims tsc itself rejects these calls (with the same codes).
  const T: number = 4;
  const L: number = 2;
  const H: number = 2;
  const D: number = 8;
  const args = () => ({
    kv: b.empty('f32', [T, L, 2 * H * D]),
    kNormWeight: b.tensor('f32', [L, D], new Array(L * D).fill(1)),
    eps: b.tensor('f32', [L], [1e-6, 1e-6]),
    cosSinCache: b.empty('f32', [16, 8]),
    positions: b.tensor('i32', [T], [0, 1, 2, 3]),
    numKvHeads: H,
    headDim: D,
    rotaryDim: 8,
  });
  const calls: (() => unknown)[] = [
    () => b.fusedNormRopeStacked({ ...args(), kNormWeight: b.tensor('f32', [L, H * D], new Array(L * H * D).fill(1)) }),
    () => b.fusedNormRopeStacked({ ...args(), eps: b.tensor('f32', [1], [1e-6]) }),
    () => b.fusedNormRopeStacked({ ...args(), kOut: b.empty('f32', [T, L, H, D]) }),
    () => b.fusedNormRopeStacked({ ...args(), positions: b.tensor('i32', [T], [0, 1, 2, 99]) }),
    () => {
      const m = b.createKvMaterializer({ kvWeight: b.empty('f32', [L, 2 * H * D, 16]), kNormWeight: b.tensor('f32', [L, D], new Array(L * D).fill(1)), eps: 1e-6, numKvHeads: H, headDim: D, ropeBase: 10000 });
      m.materialize({ ctxHidden: b.empty('f32', [T, 16]), positions: b.tensor('i32', [T - 1], [0, 1, 2]), writeLayerKv: () => {} });
    },
    () =>
      b.ropePoolFused({
        q: b.empty('f32', [T, 4, D]),
        k: b.empty('f32', [T, H, D]),
        v: b.empty('f32', [T, H, D]),
        positions: b.tensor('i32', [T], [0, 1, 2, 3]),
        slots: b.tensor('i32', [T - 1], [0, 1, 2]),
        kPool: b.empty('f32', [8, H, D]),
        vPool: b.empty('f32', [8, H, D]),
        headDim: D,
        numQoHeads: 4,
        numKvHeads: H,
        ropeBase: 10000,
      }),
  ];
  return calls.map((call) => {
    try {
      call();
    } catch (e) {
      if (isContractError(e)) return { code: e.code, message: e.message };
      throw e;
    }
    throw new Error(`expected a ContractError from ${call.toString().slice(0, 80)}`);
  });
}

/** The original system's wording of the seed conditions, numbers filled in as a user would paste them. */
const upstream: { message: string; code: string }[] = [
  { message: 'ValueError: positions must match ctx_hidden token count for fused KV materialization: positions=7, total_ctx=8.', code: 'KV023' },
  { message: 'positions/slots must have one entry per token', code: 'KV034' },
  { message: 'Invalid k_out shape for fused KV materialization: got (8, 5, 8, 128), expected (5, 8, 8, 128).', code: 'KV014' },
  { message: 'Invalid stacked fused KV projection shape: got (8, 10240), expected 3D [total_ctx, n_layers, kv_size*2].', code: 'KV010' },
  { message: 'Invalid stacked eps shape for fused KV materialization: got (), expected (5,).', code: 'KV013' },
];

describe.skipIf(!haveChromium)('the built site in Chromium', () => {
  const siteDir = inject('siteDir');
  const base = inject('siteBase');
  let server: Server;
  let origin: string;
  let context: BrowserContext;
  let profile: string;
  /** Console errors, uncaught exceptions and failed requests, per page URL. */
  const problems: string[] = [];

  beforeAll(async () => {
    ({ server, origin } = await serveSite(siteDir, base));
    profile = mkdtempSync(join(tmpdir(), 'kvkit-docs-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      viewport: { width: 1280, height: 900 },
    });
    context.on('page', watch);
  });

  afterAll(async () => {
    await context?.close();
    server?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  function watch(page: Page): void {
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`${page.url()}: console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`${page.url()}: ${e.message}`));
    // ERR_ABORTED: a lazy module still loading when the test navigates on; a missing file shows as a 404 below.
    page.on('requestfailed', (r) => {
      if (r.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`${page.url()}: request failed ${r.url()} ${r.failure()?.errorText}`);
    });
    // Everything the site needs is in the build: nothing is fetched from elsewhere.
    page.on('request', (r) => {
      if (!r.url().startsWith(origin) && !/^(data|blob):/.test(r.url())) problems.push(`${page.url()}: fetched ${r.url()}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`${page.url()}: ${r.status()} ${r.url()}`);
    });
  }

  const url = (path: string) => `${origin}${base}${path}`;

  async function lookupResults(page: Page): Promise<string[]> {
    const results = page.getByRole('list', { name: 'Matching error pages' }).getByRole('link');
    await results.first().waitFor();
    return results.evaluateAll((links) => links.map((a) => (a as HTMLAnchorElement).pathname));
  }

  async function pasteAndRank(page: Page, message: string): Promise<string[]> {
    await page.goto(url('lookup/'));
    const box = page.getByRole('textbox', { name: 'Error message' });
    await box.fill(message);
    return lookupResults(page);
  }

  async function expectErrorPage(page: Page, code: string): Promise<void> {
    expect(new URL(page.url()).pathname).toBe(`${base}errors/${code.toLowerCase()}/`);
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toContain(code);
    const headings = await page.getByRole('heading', { level: 2 }).allTextContents();
    for (const s of SECTIONS) expect(headings.map((h) => h.trim()), `${code}: ${s}`).toContain(s);
  }

  it('ranks the right page first for real messages thrown by the CPU backend, whole or without the code and link', async () => {
    const page = await context.newPage();
    const thrown = realErrors();
    expect(new Set(thrown.map((t) => t.code)).size).toBe(thrown.length);
    for (const { code, message } of thrown) {
      expect((await pasteAndRank(page, message))[0], message).toBe(`${base}errors/${code.toLowerCase()}/`);
      // Only the sentence itself: the matcher must recognise the template, not just the [KVxxx] tag.
      const bare = message.replace(/^\[KV\d{3}\]\s*/, '').replace(/\s*(?:See \S+ or run|Run) npx kvkit explain \S+$/, '');
      expect(bare, message).not.toMatch(/KV\d{3}/);
      expect((await pasteAndRank(page, bare))[0], bare).toBe(`${base}errors/${code.toLowerCase()}/`);
    }
    // Follow the best match of one and check the page it lands on.
    await pasteAndRank(page, thrown[0]!.message);
    await page.getByRole('list', { name: 'Matching error pages' }).getByRole('link').first().click();
    await expectErrorPage(page, thrown[0]!.code);
    await page.close();
  });

  it('ranks the right page first for the upstream wording of every seed condition', async () => {
    const page = await context.newPage();
    for (const { message, code } of upstream) {
      const ranked = await pasteAndRank(page, message);
      expect(ranked[0], message).toBe(`${base}errors/${code.toLowerCase()}/`);
      await page.goto(new URL(ranked[0]!, origin).href);
      await expectErrorPage(page, code);
    }
    await page.close();
  });

  it('runs the lookup from ?q= on load', async () => {
    const page = await context.newPage();
    const { message, code } = upstream[4]!;
    await page.goto(`${url('lookup/')}?q=${encodeURIComponent(message)}`);
    await expect(page.getByRole('textbox', { name: 'Error message' }).inputValue()).resolves.toBe(message);
    expect((await lookupResults(page))[0]).toBe(`${base}errors/${code.toLowerCase()}/`);
    await page.close();
  });

  it('works from the keyboard: Tab to the box, type, arrows through the matches, Enter to open', async () => {
    const page = await context.newPage();
    await page.goto(url('lookup/'));
    let tabs = 0;
    while (!(await page.evaluate(() => document.activeElement?.id === 'kv-lookup-q'))) {
      await page.keyboard.press('Tab');
      expect(++tabs, 'the box is reachable with Tab').toBeLessThan(60);
    }
    const { message, code } = upstream[1]!;
    await page.keyboard.type(message);
    const ranked = await lookupResults(page);
    expect(ranked[0]).toBe(`${base}errors/${code.toLowerCase()}/`);
    expect(new URL(page.url()).searchParams.get('q')).toBe(message);

    const focused = () => page.evaluate(() => (document.activeElement as HTMLAnchorElement | null)?.pathname ?? document.activeElement?.id);
    await page.keyboard.press('ArrowDown');
    await expect(focused()).resolves.toBe(ranked[0]);
    if (ranked.length > 1) {
      await page.keyboard.press('ArrowDown');
      await expect(focused()).resolves.toBe(ranked[1]);
      await page.keyboard.press('ArrowUp');
      await expect(focused()).resolves.toBe(ranked[0]);
    }
    await page.keyboard.press('ArrowUp');
    await expect(focused()).resolves.toBe('kv-lookup-q');

    // Enter in the box searches and moves to the best match; Enter again opens it.
    await page.keyboard.press('Enter');
    await expect(focused()).resolves.toBe(ranked[0]);
    await Promise.all([page.waitForURL(`**${ranked[0]}`), page.keyboard.press('Enter')]);
    await expectErrorPage(page, code);
    await page.close();
  });

  it("ContractError.docsUrl, pointed at this site, opens the code's page", async () => {
    setDocsBase(`${origin}${base}`);
    try {
      const [thrown] = (() => {
        const b = createCpuBackend();
        try {
          b.tensor('f32', [2, 2], [1, 2, 3]);
        } catch (e) {
          if (isContractError(e)) return [e];
        }
        throw new Error('expected a ContractError');
      })();
      const page = await context.newPage();
      await page.goto(thrown.docsUrl!);
      await expectErrorPage(page, thrown.code);
      expect(thrown.message).toContain(`See ${thrown.docsUrl} or run npx kvkit explain ${thrown.code}`);
      await page.close();
    } finally {
      setDocsBase(undefined);
    }
  });

  it('full-text search (Pagefind) finds error pages by their words', async () => {
    const page = await context.newPage();
    await page.goto(url(''));
    await page.getByRole('button', { name: 'Search' }).click();
    await page.locator('dialog .pagefind-ui__search-input').fill('k_norm_weight stacked');
    const hit = page.locator('.pagefind-ui__result-link').first();
    await hit.waitFor();
    const hrefs = await page.locator('.pagefind-ui__result-link').evaluateAll((links) => links.map((a) => (a as HTMLAnchorElement).pathname));
    expect(hrefs).toContain(`${base}errors/kv012/`);
    await page.close();
  });

  it('leaves screenshots of the lookup and an error page', async () => {
    const dir = join(docsRoot, 'screenshots');
    mkdirSync(dir, { recursive: true });
    const page = await context.newPage();
    await page.goto(`${url('lookup/')}?q=${encodeURIComponent(realErrors()[0]!.message)}`);
    await lookupResults(page);
    await page.screenshot({ path: join(dir, 'lookup.png') });
    await page.goto(url('errors/kv012/'));
    await page.screenshot({ path: join(dir, 'error-kv012.png') });
    await page.screenshot({ path: join(dir, 'error-kv012-full.png'), fullPage: true });
    await page.goto(url('ops/fusedNormRopeStacked/'));
    await page.screenshot({ path: join(dir, 'op-fusedNormRopeStacked.png'), fullPage: true });
    await page.goto(url('benchmarks/'));
    await page.screenshot({ path: join(dir, 'benchmarks.png'), fullPage: true });
    for (const f of ['lookup.png', 'error-kv012.png', 'error-kv012-full.png', 'op-fusedNormRopeStacked.png', 'benchmarks.png']) expect(existsSync(join(dir, f))).toBe(true);
    await page.close();
  });

  it('logged no console error, uncaught exception or failed request on any page visited', () => {
    expect(problems, problems.join('\n')).toEqual([]);
  });
});
