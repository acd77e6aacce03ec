import { existsSync } from 'node:fs';
import type { Server } from 'node:http';
import axe from 'axe-core';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { listFiles, serveSite } from './support/site.js';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`docs accessibility and layout scans skipped: ${CHROMIUM} is not installed (Debian's chromium package provides it)`);

/** The two widths every page must work at: a phone in portrait, and a laptop. */
const PHONE = 390;
const DESKTOP = 1280;

/**
 * What each pass covers. Every page in light at both widths (the layout changes with the width, and with it what
 * every rule sees) and in dark at the laptop width; the theme changes only colours, so the dark pass runs the
 * colour rules. Dark on a phone is checked on one page of each kind (`SAMPLED`).
 */
const COLOUR_RULES = ['color-contrast', 'link-in-text-block'];
const SCANS = [
  { width: DESKTOP, theme: 'light', rules: undefined, sampled: false },
  { width: PHONE, theme: 'light', rules: undefined, sampled: false },
  { width: DESKTOP, theme: 'dark', rules: COLOUR_RULES, sampled: false },
  { width: PHONE, theme: 'dark', rules: COLOUR_RULES, sampled: true },
] as const;

/** One page of each kind: the home page, a content page, an error, an op, and the generated pages; their sidebar is scanned too. */
const SAMPLED = ['', 'contract-error/', 'errors/kv012/', 'ops/ropePoolFused/', 'benchmarks/', 'kernels/', 'lookup/', 'errors/', 'ops/'];

/** Pages scanned at once: one per core keeps the scan of ~110 pages within a minute or two per pass. */
const PARALLEL = 2;

interface Finding {
  id: string;
  impact: string;
  nodes: string[];
}

describe.skipIf(!haveChromium)('the built site in Chromium: accessibility and layout', () => {
  const siteDir = inject('siteDir');
  const base = inject('siteBase');
  // Every page the build wrote, so pages added later are scanned with no change here.
  const pages = listFiles(siteDir)
    .filter((f) => f.endsWith('.html'))
    .map((f) => f.replace(/(^|\/)index\.html$/, '$1'))
    .sort();
  let server: Server;
  let origin: string;
  let browser: Browser;

  beforeAll(async () => {
    ({ server, origin } = await serveSite(siteDir, base));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });

  afterAll(async () => {
    await browser?.close();
    server?.close();
  });

  const url = (path: string) => `${origin}${base}${path}`;

  async function contextFor(width: number, theme: 'light' | 'dark'): Promise<BrowserContext> {
    // Starlight follows the system's colour scheme until the reader picks one.
    const context = await browser.newContext({ viewport: { width, height: 900 }, colorScheme: theme });
    // noHtml: the report names elements by selector; copying each one's markup costs more than the checks.
    await context.addInitScript({ content: `${axe.source}\naxe.configure({ noHtml: true });` });
    return context;
  }

  /** The sidebar is the same on every page but for the current entry: scanned whole on the sampled pages, left out elsewhere. */
  async function scan(page: Page, path: string, rules: readonly string[] | undefined): Promise<{ theme: string | undefined; findings: Finding[] }> {
    await page.goto(url(path), { waitUntil: 'domcontentloaded' });
    const theme = await page.evaluate(() => document.documentElement.dataset.theme);
    const results = await page.evaluate(
      async ([only, withSidebar]) => {
        const context = withSidebar ? document : { exclude: [['#starlight__sidebar']] };
        const run = await (window as unknown as { axe: typeof axe }).axe.run(context, {
          resultTypes: ['violations'],
          ...(only ? { runOnly: { type: 'rule', values: only } } : {}),
        });
        return run.violations.map((v) => ({
          id: v.id,
          impact: v.impact ?? '',
          nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${(n.failureSummary ?? '').replace(/\s+/g, ' ').slice(0, 200)}`),
        }));
      },
      [rules ? [...rules] : undefined, SAMPLED.includes(path)] as const,
    );
    return { theme, findings: results };
  }

  it.each(SCANS.map((s) => [`${s.sampled ? 'a page of each kind' : 'every page'} at ${s.width} px, ${s.theme}${s.rules ? ` (${s.rules.join(', ')})` : ''}`, s] as const))(
    'axe-core finds no serious or critical violation on %s',
    async (_, { width, theme, rules, sampled }) => {
      expect(pages.length).toBeGreaterThan(50);
      for (const p of SAMPLED) expect(pages, `${p} was not built`).toContain(p);
      const context = await contextFor(width, theme);
      const found: string[] = [];
      const queue = sampled ? [...SAMPLED] : [...pages];
      const worker = async () => {
        const page = await context.newPage();
        for (let path = queue.shift(); path !== undefined; path = queue.shift()) {
          const result = await scan(page, path, rules);
          if (result.theme !== theme) found.push(`${path}: rendered in the ${result.theme} theme, not ${theme}`);
          for (const f of result.findings) {
            if (f.impact === 'serious' || f.impact === 'critical') found.push(`${path}: ${f.id} (${f.impact}) on ${f.nodes.length}: ${f.nodes.slice(0, 3).join(' | ')}`);
          }
        }
        await page.close();
      };
      await Promise.all(Array.from({ length: PARALLEL }, worker));
      await context.close();
      expect(found, found.join('\n')).toEqual([]);
    },
    600_000,
  );

  describe('benchmarks page', () => {
    /** Every table of the page with its scroll box and the content column, measured with every `<details>` open. */
    async function measureTables(page: Page) {
      return page.evaluate(() => {
        for (const d of document.querySelectorAll('details')) d.open = true;
        const column = document.querySelector('.sl-markdown-content')!.getBoundingClientRect();
        return [...document.querySelectorAll('.sl-markdown-content table')].map((table) => {
          const box = table.closest('.kv-table-scroll') as HTMLElement | null;
          const rect = (box ?? table).getBoundingClientRect();
          return {
            caption: table.querySelector('caption')?.textContent?.trim() ?? '',
            className: table.className,
            right: rect.right,
            left: rect.left,
            columnLeft: column.left,
            columnRight: column.right,
            tableWidth: table.scrollWidth,
            boxWidth: box?.clientWidth ?? table.clientWidth,
            overflows: (box ?? table).scrollWidth > (box ?? table).clientWidth,
            box: box ? { tabindex: box.getAttribute('tabindex'), role: box.getAttribute('role'), name: box.getAttribute('aria-label') ?? '' } : undefined,
          };
        });
      });
    }

    it.each([PHONE, DESKTOP])('at %i px no table is wider than the column; a wider one scrolls only inside a named, focusable box', async (width) => {
      const context = await contextFor(width, 'light');
      const page = await context.newPage();
      await page.goto(url('benchmarks/'));
      const tables = await measureTables(page);
      // The summary, the ceilings, and a chart at least.
      expect(tables.length).toBeGreaterThan(2);
      const bad: string[] = [];
      for (const t of tables) {
        const what = `${t.className} "${t.caption}"`;
        if (t.left < t.columnLeft - 0.5 || t.right > t.columnRight + 0.5) bad.push(`${what}: spans ${t.left}-${t.right}, the column ${t.columnLeft}-${t.columnRight}`);
        if (!t.box) bad.push(`${what}: not in a scroll box`);
        else if (t.box.tabindex !== '0' || t.box.role !== 'region' || t.box.name.length === 0) bad.push(`${what}: its scroll box is not a named, focusable region`);
        // On a laptop every table fits outright: the Rate and Target columns once ran off the edge.
        if (width === DESKTOP && t.overflows) bad.push(`${what}: ${t.tableWidth} px wide in a ${t.boxWidth} px column`);
      }
      const pageWidth = await page.evaluate(() => document.documentElement.scrollWidth);
      if (pageWidth > width) bad.push(`the page scrolls sideways: ${pageWidth} px at ${width}`);
      expect(bad, bad.join('\n')).toEqual([]);
      await context.close();
    });

    it('is short by default: the summary fits one screen, every per-row chart is behind a closed <details>', async () => {
      const context = await contextFor(DESKTOP, 'light');
      const page = await context.newPage();
      await page.goto(url('benchmarks/'));
      const layout = await page.evaluate(() => {
        const summary = document.querySelector('table.kv-summary')!.getBoundingClientRect();
        const charts = [...document.querySelectorAll('table.kv-bars')];
        return {
          summaryHeight: summary.height,
          charts: charts.length,
          hidden: charts.filter((t) => t.closest('details:not([open])') !== null && !t.checkVisibility()).length,
          height: document.documentElement.scrollHeight,
        };
      });
      expect(layout.charts).toBeGreaterThan(0);
      expect(layout.hidden).toBe(layout.charts);
      expect(layout.summaryHeight).toBeLessThanOrEqual(900);
      await context.close();
    });

    it('tables are reached with Tab, and a table wider than a phone scrolls from the keyboard', async () => {
      const context = await contextFor(PHONE, 'light');
      const page = await context.newPage();
      await page.goto(url('benchmarks/'));
      let tabs = 0;
      while (!(await page.evaluate(() => document.activeElement?.classList.contains('kv-table-scroll') ?? false))) {
        await page.keyboard.press('Tab');
        expect(++tabs, 'a table is reachable with Tab').toBeLessThan(200);
      }
      await expect(page.evaluate(() => document.activeElement?.querySelector('table')?.classList.contains('kv-summary'))).resolves.toBe(true);

      const wide = await page.evaluate(() => {
        for (const d of document.querySelectorAll('details')) d.open = true;
        const boxes = [...document.querySelectorAll<HTMLElement>('.kv-table-scroll')];
        return boxes.findIndex((b) => b.scrollWidth > b.clientWidth + 1);
      });
      expect(wide, 'some benchmarks table is wider than a phone column').toBeGreaterThanOrEqual(0);
      const box = page.locator('.kv-table-scroll').nth(wide);
      await box.focus();
      await page.keyboard.press('ArrowRight');
      // Keyboard scrolling is animated: wait for it to move.
      await expect.poll(() => box.evaluate((b) => b.scrollLeft), { timeout: 5_000 }).toBeGreaterThan(0);
      await context.close();
    });
  });
});
