import type { Backend, FloatDType } from '@kvkit/contracts';
import { isContractError, setDocsBase } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { createWebGpuBackend, probeWebGpu } from '@kvkit/kernels-wgsl';
import { timeOnDevice } from '@kvkit/kernels-wgsl/profiling';
import { difference, formatError, formatValue } from './compare.js';
import { type OpRun, opRuns, type TryDims } from './runs.js';

/** Inputs are the same on both backends: every random tensor comes from this seed. */
const SEED = 20261202;
/** Values shown side by side per op: the first few of its first output, then its worst element. */
const SHOWN = 4;
/** This page's own bounds (not kvkit's), so a typo cannot ask the browser for gigabytes. */
type DimName = 'tokens' | 'layers' | 'numQoHeads' | 'numKvHeads' | 'headDim';
const PAGE_LIMITS: Readonly<Record<DimName, number>> = { tokens: 1024, layers: 8, numQoHeads: 64, numKvHeads: 64, headDim: 512 };
/** Calls timed per op on WebGPU (after two untimed ones), and samples on the CPU. */
const TIMED_CALLS = 10;
const TIMED_SAMPLES = 5;
/** A CPU sample runs calls until at least this long has passed. */
const CPU_SAMPLE_US = 5000;

interface Chosen {
  readonly backend: Backend;
  /** 'webgpu' or 'cpu': what ran. */
  readonly kind: 'webgpu' | 'cpu';
  /** The adapter, or why WebGPU is not used. */
  readonly note: string;
}

/** The WebGPU backend on the reader's adapter, or the CPU backend with the reason (KV050 where no adapter answers). */
async function chooseBackend(): Promise<Chosen & { error?: unknown }> {
  const probe = await probeWebGpu();
  try {
    const backend = probe.ok ? await createWebGpuBackend({ gpu: { requestAdapter: async () => probe.adapter } }) : await createWebGpuBackend();
    const what = probe.ok ? `${probe.description}${probe.software ? ', a software renderer (correct, but no measure of GPU speed)' : ''}` : 'an adapter';
    return { backend, kind: 'webgpu', note: what };
  } catch (error) {
    return { backend: createCpuBackend(), kind: 'cpu', note: 'WebGPU is not available here', error };
  }
}

const el = <K extends keyof HTMLElementTagNameMap>(tag: K, text?: string, attrs: Record<string, string> = {}): HTMLElementTagNameMap[K] => {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
};

/** A ContractError as the page shows it: the code (linked to its page here), the message, the declared fixes. */
function showContractError(target: HTMLElement, e: unknown, where: string): void {
  target.replaceChildren();
  if (!isContractError(e)) {
    target.dataset.code = '';
    target.append(el('p', `${where} threw something other than a ContractError: ${e instanceof Error ? e.message : String(e)}`));
    return;
  }
  target.dataset.code = e.code;
  const head = el('p');
  const link = el('a', e.code, { href: e.docsUrl ?? '' });
  const code = el('code');
  code.append(link);
  head.append(`${where} threw ContractError `, code, ` (its page: `, el('a', e.docsUrl ?? '', { href: e.docsUrl ?? '' }), ').');
  const message = el('pre', e.message, { 'data-message': '' });
  target.append(head, message);
  if (e.fixes.length > 0) {
    target.append(el('p', 'What to do (the fixes its declaration lists):'));
    const list = el('ul');
    for (const f of e.fixes) list.append(el('li', f));
    target.append(list);
  }
}

function readDims(form: HTMLFormElement): { dims: TryDims; overLimit: DimName[] } {
  const value = (name: string) => (form.elements.namedItem(name) as HTMLInputElement).value;
  // Number('2.5') stays 2.5 and '' is 0: kvkit's own checks say what is wrong with them.
  const num = (name: DimName) => (value(name).trim() === '' ? Number.NaN : Number(value(name)));
  const dims: TryDims = {
    tokens: num('tokens'),
    layers: num('layers'),
    numQoHeads: num('numQoHeads'),
    numKvHeads: num('numKvHeads'),
    headDim: num('headDim'),
    dtype: value('dtype') as FloatDType,
  };
  const overLimit = (Object.keys(PAGE_LIMITS) as DimName[]).filter((k) => dims[k] > PAGE_LIMITS[k]);
  return { dims, overLimit };
}

/** Device time where the adapter has timestamps (else batched wall time, as the profiling hooks measure it); on the CPU, wall time around the call and its sync. */
async function timeCalls(chosen: Chosen, enqueue: () => void): Promise<{ us: number; how: string }> {
  if (chosen.kind === 'webgpu') {
    const t = await timeOnDevice(chosen.backend, enqueue, { warmup: 2, reps: TIMED_CALLS });
    return {
      us: t.medianUs,
      how:
        t.method === 'timestamp-query'
          ? `device time from timestamp queries, median of ${TIMED_CALLS} calls`
          : `wall time per call of calls submitted together, until the queue is done (this adapter gives no timestamp-query), median of ${TIMED_CALLS} batches`,
    };
  }
  // The browser's clock may tick in 100 µs steps: each sample spans enough calls to be read in it.
  const sample = async (calls: number) => {
    const start = performance.now();
    for (let i = 0; i < calls; i++) {
      enqueue();
      await chosen.backend.sync();
    }
    return ((performance.now() - start) * 1000) / calls;
  };
  let calls = 1;
  while (calls < 4096 && (await sample(calls)) * calls < CPU_SAMPLE_US) calls *= 4;
  const samples: number[] = [];
  for (let r = 0; r < TIMED_SAMPLES; r++) samples.push(await sample(calls));
  samples.sort((a, b) => a - b);
  return { us: samples[samples.length >> 1]!, how: `wall time of the call and await backend.sync() on the CPU backend, median of ${TIMED_SAMPLES} samples of ${calls} call${calls === 1 ? '' : 's'}` };
}

function valuesTable(name: string, out: Float32Array, ref: Float32Array, worst: number, label: string): HTMLTableElement {
  const table = el('table');
  table.append(el('caption', `${name}: values side by side`));
  const head = el('tr');
  for (const h of ['element', label, 'CPU reference', 'difference']) head.append(el('th', h, { scope: 'col' }));
  table.append(el('thead'));
  table.tHead!.append(head);
  const body = el('tbody');
  const shown = [...Array.from({ length: Math.min(SHOWN, out.length) }, (_, i) => i)];
  if (out.length > 0 && !shown.includes(worst)) shown.push(worst);
  for (const i of shown) {
    const row = el('tr');
    row.append(el('th', i === worst && i >= SHOWN ? `${i} (largest difference)` : String(i), { scope: 'row' }));
    row.append(el('td', formatValue(out[i]!)), el('td', formatValue(ref[i]!)), el('td', formatError(Math.abs(out[i]! - ref[i]!))));
    body.append(row);
  }
  table.append(body);
  return table;
}

/** Runs one op on the chosen backend and on the CPU reference, and shows how they compare and how long the call took. */
async function runOp(card: HTMLElement, run: OpRun, dims: TryDims, chosen: Chosen, reference: Backend): Promise<void> {
  const result = card.querySelector<HTMLElement>('[data-result]')!;
  const b = chosen.backend;
  card.dataset.state = 'running';
  result.replaceChildren(el('p', `Running ${run.op}…`));
  if (!b.ops.includes(run.method)) {
    card.dataset.state = 'unsupported';
    result.replaceChildren(el('p', `${b.label} does not run ${run.method} yet: its backend.ops lists ${b.ops.join(', ')}.`));
    return;
  }
  const prepared = [];
  try {
    const mine = run.prepare(b, dims, SEED);
    prepared.push(mine);
    const out = await mine.result();
    await b.sync();
    const time = await timeCalls(chosen, mine.enqueue);
    const theirs = run.prepare(reference, dims, SEED);
    prepared.push(theirs);
    const ref = await theirs.result();

    const names = Object.keys(out);
    const diffs = names.map((n) => difference(out[n]!, ref[n]!));
    const worst = Math.max(...diffs.map((d) => d.relative));
    card.dataset.state = 'done';
    card.dataset.backend = chosen.kind;
    card.dataset.relError = String(worst);
    card.dataset.timeUs = String(time.us);
    card.dataset.maxPosition = String(run.maxPosition(dims));
    card.dataset.dtype = dims.dtype;
    const label = chosen.kind === 'webgpu' ? 'WebGPU' : 'CPU backend';
    const summary = el('p');
    summary.append(
      chosen.kind === 'webgpu' ? `Ran on WebGPU: ${chosen.note}. ` : 'Ran on the CPU backend, which is the reference itself: it matches by construction. ',
      'Largest relative error against the CPU reference: ',
      el('strong', formatError(worst), { 'data-rel-error': '' }),
      `. Time: `,
      el('strong', `${time.us.toFixed(1)} µs`, { 'data-time': '' }),
      ` (${time.how}).`,
    );
    const errors = el('table');
    errors.append(el('caption', `${run.op}: each output against the CPU reference`));
    const head = el('tr');
    for (const h of ['output', 'elements', 'relative error', 'largest difference']) head.append(el('th', h, { scope: 'col' }));
    errors.append(el('thead'));
    errors.tHead!.append(head);
    const body = el('tbody');
    names.forEach((n, i) => {
      const row = el('tr', undefined, { 'data-output': n, 'data-rel-error': String(diffs[i]!.relative) });
      row.append(el('th', n, { scope: 'row' }), el('td', String(out[n]!.length)), el('td', formatError(diffs[i]!.relative)), el('td', formatError(diffs[i]!.largest)));
      body.append(row);
    });
    errors.append(body);
    const first = names[0]!;
    result.replaceChildren(summary, errors, valuesTable(first, out[first]!, ref[first]!, diffs[0]!.largestAt, label));
  } catch (e) {
    card.dataset.state = 'rejected';
    const box = el('div', undefined, { class: 'kv-try-rejected' });
    showContractError(box, e, `With these shapes, ${run.op}`);
    result.replaceChildren(box);
    markFields(card.closest('[data-try]')!, e);
  } finally {
    for (const p of prepared) p.dispose();
    // A call rejected after enqueuing (a device-side value error) is reported by this sync; the run already failed.
    await b.sync().catch(() => {});
  }
}

/** The inputs a ContractError names (`details.arg`), marked invalid; rotaryDim is the head dim here. */
function markFields(root: HTMLElement, e: unknown): void {
  const arg = isContractError(e) ? String(e.details.arg ?? '') : '';
  const name = arg === 'rotaryDim' ? 'headDim' : arg;
  for (const input of root.querySelectorAll<HTMLInputElement>('input[name]')) {
    if (input.name === name) input.setAttribute('aria-invalid', 'true');
  }
}

async function makeMistake(card: HTMLElement, run: OpRun, dims: TryDims, chosen: Chosen): Promise<void> {
  const target = card.querySelector<HTMLElement>('[data-mistake]')!;
  const mistake = run.mistake;
  let where = `${run.op}, called with ${mistake.label},`;
  try {
    mistake.call(chosen.backend, dims, SEED);
    // Values live on the device there: the next sync is what reports them.
    where = `await backend.sync() after ${run.op} with ${mistake.label}`;
    await chosen.backend.sync();
    target.dataset.code = '';
    target.replaceChildren(el('p', `${run.op} with ${mistake.label} threw nothing, which is a bug: please report it.`));
  } catch (e) {
    showContractError(target, e, where);
  }
}

/** The try-it page: the backend chosen once, each op run on it and on the CPU reference, and a wrong call per op. */
export async function mountTry(root: HTMLElement): Promise<void> {
  // ContractError.docsUrl then names this site's own error pages.
  setDocsBase(new URL(root.dataset.base!, window.location.href).href);
  const status = root.querySelector<HTMLElement>('[data-backend-status]')!;
  const why = root.querySelector<HTMLElement>('[data-backend-why]')!;
  const form = root.querySelector<HTMLFormElement>('form')!;
  const formError = root.querySelector<HTMLElement>('[data-form-error]')!;
  const chosen = await chooseBackend();
  const reference = createCpuBackend();
  root.dataset.backend = chosen.kind;
  status.textContent =
    chosen.kind === 'webgpu'
      ? `Backend: WebGPU (createWebGpuBackend), on ${chosen.note}.`
      : 'Backend: the CPU backend (createCpuBackend), because WebGPU is not available in this browser. The results below are the reference compared with itself.';
  if (chosen.error) showContractError(why, chosen.error, 'createWebGpuBackend()');

  let busy = false;
  const buttons = () => root.querySelectorAll<HTMLButtonElement>('button');
  const exclusive = async (work: () => Promise<void>) => {
    if (busy) return;
    busy = true;
    for (const b of buttons()) b.disabled = true;
    try {
      await work();
    } finally {
      for (const b of buttons()) b.disabled = false;
      busy = false;
    }
  };
  /** The dims, or undefined after saying which pass this page's limits. */
  const dims = (): TryDims | undefined => {
    for (const input of root.querySelectorAll('input[aria-invalid]')) input.removeAttribute('aria-invalid');
    const { dims, overLimit } = readDims(form);
    formError.textContent = overLimit.length ? `This page runs at most ${overLimit.map((k) => `${PAGE_LIMITS[k]} for ${k}`).join(', ')} (its own limit, to keep the runs small; kvkit has none of these).` : '';
    for (const k of overLimit) form.querySelector(`input[name="${k}"]`)?.setAttribute('aria-invalid', 'true');
    return overLimit.length ? undefined : dims;
  };
  const cards = new Map<OpRun, HTMLElement>(opRuns.map((run) => [run, root.querySelector<HTMLElement>(`[data-op="${run.op}"]`)!]));
  const describeInputs = (d: TryDims) => {
    for (const [run, card] of cards) card.querySelector('[data-inputs]')!.textContent = `Inputs: ${run.describe(d)}`;
  };

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void exclusive(async () => {
      const d = dims();
      if (!d) return;
      describeInputs(d);
      for (const card of cards.values()) {
        card.dataset.state = 'queued';
        card.querySelector('[data-result]')!.replaceChildren(el('p', 'Waiting for the ops before it…'));
      }
      for (const [run, card] of cards) await runOp(card, run, d, chosen, reference);
    });
  });
  for (const [run, card] of cards) {
    card.querySelector<HTMLButtonElement>('[data-run]')!.addEventListener('click', () =>
      exclusive(async () => {
        const d = dims();
        if (d) {
          describeInputs(d);
          await runOp(card, run, d, chosen, reference);
        }
      }),
    );
    card.querySelector<HTMLButtonElement>('[data-make-mistake]')!.addEventListener('click', () =>
      exclusive(async () => {
        const d = dims();
        if (d) await makeMistake(card, run, d, chosen);
      }),
    );
  }
  const d = readDims(form).dims;
  describeInputs(d);
  root.dataset.ready = 'true';
}
