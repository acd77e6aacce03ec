/**
 * kvkit inside a browser engine. The page (the engine) owns its GPUDevice
 * and every buffer; its own pass writes each step's fused qkv projection;
 * kvkit works on views of the engine's buffers in place: ropePoolFused
 * writes K and V into the engine's caches, pagedAttention reads each
 * request's slots back into the engine's output buffer, and copySlots
 * forks a request (copy-on-write of its last page). Nothing is read back
 * until the end: the engine's own copies to MAP_READ buffers, with no
 * `flush()` before them (a call on the engine's buffers submits its work
 * before it returns). The result goes on `window.engineRun` (the test
 * compares it with the CPU reference).
 */
import { createWebGpuBackend, gpuBufferOf, webGpuBackendStats } from '@kvkit/kernels-wgsl';
import type { WebGpuBackend } from '@kvkit/kernels-wgsl';
import { isContractError } from '@kvkit/contracts';
import { createEngine, outputBuffer, readBack, runProjection, snapshot } from './engine.js';
import { CACHE_ELEMENTS, FORK, PATTERN, plan, QKV_WIDTH, SCENARIO, SLOTS } from './scenario.js';
import type { EngineRunReport, EngineRunResult, StepPlan, StepReport, WrongCall } from './scenario.js';

declare global {
  interface Window {
    engineRun?: EngineRunResult;
  }
}

type Range = { buffer: GPUBuffer; byteOffset: number; byteLength: number };

/** The call's result, and how many command buffers kvkit submitted while it ran. */
function counted<T>(backend: WebGpuBackend, call: () => T): [T, number] {
  const before = webGpuBackendStats(backend).submits;
  const result = call();
  return [result, webGpuBackendStats(backend).submits - before];
}

async function run(): Promise<EngineRunResult> {
  const adapter = await navigator.gpu?.requestAdapter();
  if (!adapter) return { ok: false, error: navigator.gpu ? 'navigator.gpu.requestAdapter() gave no adapter' : 'this browser has no navigator.gpu' };
  const device = await adapter.requestDevice();
  const engine = createEngine(device);

  const backend = await createWebGpuBackend({ device });
  const { numQoHeads, numKvHeads, headDim, rotaryDim, ropeStyle, ropeBase, byteOffsets: at } = SCENARIO;
  const heads = { numQoHeads, numKvHeads, headDim };
  const cache = [SLOTS, numKvHeads, headDim] as const;
  // The engine's caches, wrapped in place once: every call below reads or writes them there.
  const kPool = backend.wrap(engine.kCache, 'f32', cache, { byteOffset: at.kCache });
  const vPool = backend.wrap(engine.vCache, 'f32', cache, { byteOffset: at.vCache });
  const caches = (): Range[] => [snapshot(device, engine.kCache, at.kCache, 4 * CACHE_ELEMENTS), snapshot(device, engine.vCache, at.vCache, 4 * CACHE_ELEMENTS)];
  const { steps, fork } = plan();

  const reads: Range[] = [];
  const later: ((words: Uint32Array[]) => void)[] = [];
  /** Ranges to read at the end; `use` gets their words. */
  const readLater = (ranges: Range[], use: (words: Uint32Array[]) => void) => {
    const from = reads.length;
    reads.push(...ranges);
    later.push((words) => use(words.slice(from, from + ranges.length)));
  };
  const bits = (w: Uint32Array) => [...w];

  const stepReports: StepReport[] = [];
  let forkReport: EngineRunReport['fork'] | undefined;
  let views: EngineRunReport['views'] = [];
  const attentionArgs: ReturnType<typeof attentionOf>[] = [];

  /** pagedAttention's arguments for a step: its queries (a view of qRot without the padding), the caches, the step's offsets and slots, the engine's output buffer. */
  function attentionOf(p: StepPlan, qRot: ReturnType<WebGpuBackend['ropePoolFused']>['qRot'], out: GPUBuffer) {
    const index = (values: readonly number[]) => backend.tensor('i32', [values.length], values);
    return {
      q: backend.view(qRot, [p.queries, numQoHeads, headDim]),
      kPool,
      vPool,
      qIndptr: index(p.qIndptr),
      kvIndptr: index(p.kvIndptr),
      kvSlots: index(p.kvSlots),
      ...heads,
      out: backend.wrap(out, 'f32', [p.queries, numQoHeads, headDim], { byteOffset: at.out }),
    };
  }

  for (const [i, p] of steps.entries()) {
    if (i === 1) {
      // Copy-on-write: D shares A's full pages and takes a copy of the rows of A's last page, which both go on filling.
      const index = (values: readonly number[]) => backend.tensor('i32', [values.length], values);
      const [, submits] = counted(backend, () =>
        backend.copySlots({ kSrc: kPool, vSrc: vPool, kDst: kPool, vDst: vPool, fromSlots: index(fork.fromSlots), toSlots: index(fork.toSlots) }),
      );
      readLater(caches(), ([k, v]) => (forkReport = { kCacheBits: bits(k!), vCacheBits: bits(v!), submits }));
    }
    const buffers = runProjection(device, engine, i, p.positions, p.slots);
    const qkv = backend.wrap(buffers.qkv, 'f32', [p.tokens, QKV_WIDTH], { byteOffset: at.qkv });
    const { q, k, v } = backend.splitQkv(qkv, heads);
    const positions = backend.wrap(buffers.positions, 'i32', [p.tokens], { byteOffset: at.positions });
    const slots = backend.wrap(buffers.slots, 'i32', [p.tokens], { byteOffset: at.slots });
    // It writes the engine's caches, so its work is in the queue when it returns, ahead of the engine's copies below.
    const [{ qRot, kRot }, ropeSubmits] = counted(backend, () => backend.ropePoolFused({ q, k, v, positions, slots, kPool, vPool, ...heads, rotaryDim, ropeStyle, ropeBase }));
    const out = outputBuffer(device, `engine attention output, step ${i + 1}`, p.queries * numQoHeads * headDim, 0);
    const args = attentionOf(p, qRot, out);
    attentionArgs.push(args);
    // Causal by default: query i of a request with qLen queries over kvLen tokens sees its first kvLen - qLen + i + 1.
    const [{ lse }, attentionSubmits] = counted(backend, () => backend.pagedAttention(args));
    const submits = { ropePoolFused: ropeSubmits, pagedAttention: attentionSubmits };
    readLater(
      [
        { buffer: buffers.qkv, byteOffset: at.qkv, byteLength: 4 * p.tokens * QKV_WIDTH },
        gpuBufferOf(qRot),
        gpuBufferOf(kRot),
        ...caches(),
        { buffer: out, byteOffset: at.out, byteLength: 4 * p.queries * numQoHeads * headDim },
        gpuBufferOf(lse),
      ],
      ([qkvBits, qRotBits, kRotBits, kCacheBits, vCacheBits, outBits, lseBits]) => {
        stepReports[i] = { qkvBits: bits(qkvBits!), qRotBits: bits(qRotBits!), kRotBits: bits(kRotBits!), kCacheBits: bits(kCacheBits!), vCacheBits: bits(vCacheBits!), outBits: bits(outBits!), lseBits: bits(lseBits!), submits };
      },
    );
    if (i === 0) {
      // Where kvkit says the tensors lie: in the engine's own buffers, nothing copied.
      views = (
        [
          ['q', q, buffers.qkv],
          ['k', k, buffers.qkv],
          ['v', v, buffers.qkv],
          ['kPool', kPool, engine.kCache],
          ['vPool', vPool, engine.vCache],
          ['out', args.out, out],
        ] as const
      ).map(([name, tensor, engineBuffer]) => {
        const { buffer, byteOffset, strides } = gpuBufferOf(tensor);
        return { name, inEngineBuffer: buffer === engineBuffer, byteOffset, strides: [...strides] };
      });
    }
  }
  // Value errors (a slot past the cache, offsets out of order) are found on the device and surface here: none so far.
  await backend.sync();

  // Two wrong calls into an output buffer of the engine's filled with a pattern: neither writes it.
  const last = steps.at(-1)!;
  const good = attentionArgs.at(-1)!;
  const wrongOut = outputBuffer(device, 'engine attention output, wrong calls', last.queries * numQoHeads * headDim, PATTERN);
  const wrongArgs = { ...good, out: backend.wrap(wrongOut, 'f32', [last.queries, numQoHeads, headDim], { byteOffset: at.out }) };
  const wrongCalls: WrongCall[] = [];
  const attempt = async (what: string, call: () => unknown) => {
    try {
      call();
    } catch (e) {
      wrongCalls.push({ what, when: 'call', ...codeOf(e) });
      return;
    }
    try {
      await backend.sync();
      wrongCalls.push({ what, when: 'never', message: 'accepted' });
    } catch (e) {
      wrongCalls.push({ what, when: 'sync', ...codeOf(e) });
    }
  };
  const outside = [...last.kvSlots];
  outside[outside.length - 1] = SLOTS;
  // Found on the device: the call returns, its kernels write nothing, and the next sync() rejects.
  await attempt(`a cached token's slot outside the pool (kvSlots[${outside.length - 1}] = ${SLOTS})`, () =>
    backend.pagedAttention({ ...wrongArgs, kvSlots: backend.tensor('i32', [outside.length], outside) }),
  );
  // A shape: thrown by the call itself, before anything is enqueued.
  await attempt('kvIndptr one entry short', () => backend.pagedAttention({ ...wrongArgs, kvIndptr: backend.tensor('i32', [last.kvIndptr.length - 1], last.kvIndptr.slice(1)) }));
  let wrongOutBits: number[] = [];
  readLater([{ buffer: wrongOut, byteOffset: at.out, byteLength: 4 * last.queries * numQoHeads * headDim }], ([w]) => (wrongOutBits = bits(w!)));

  const words = await readBack(device, reads);
  for (const use of later) use(words);
  const result = {
    ok: true as const,
    adapter: [adapter.info.vendor, adapter.info.architecture, adapter.info.description].filter(Boolean).join(' '),
    backend: backend.label,
    views,
    steps: stepReports,
    fork: forkReport!,
    wrongCalls,
    wrongOutBits,
  };
  backend.dispose(); // the engine's device and buffers stay the engine's
  return { ...result, text: describe(result, steps) };
}

function codeOf(e: unknown): { code?: string; message: string } {
  if (isContractError(e)) return { code: e.code, message: e.message };
  return { message: e instanceof Error ? e.message : String(e) };
}

const f32 = (words: readonly number[]) => new Float32Array(Uint32Array.from(words).buffer);
const fixed = (xs: ArrayLike<number>) => Array.from(xs, (x) => (x >= 0 ? ' ' : '') + x.toFixed(3)).join(' ');

/** The page's text: each step's requests with their attention output (query head 0, first 4 of D), the fork, the wrong calls. */
function describe(r: Omit<EngineRunReport, 'text'>, steps: readonly StepPlan[]): string {
  const { numQoHeads: Hq, headDim: D } = SCENARIO;
  const lines = [`kvkit on ${r.adapter} (${r.backend}): pools [${SLOTS}, ${SCENARIO.numKvHeads}, ${D}] f32, pages of ${SCENARIO.pageSize} slots, ${Hq} query heads over ${SCENARIO.numKvHeads} KV heads (GQA).`];
  for (const [i, p] of steps.entries()) {
    if (i === 1) {
      const { fromSlots, toSlots } = plan().fork;
      lines.push('', `fork: ${FORK.name} continues ${FORK.from}, sharing its full pages; copySlots copies slots ${fromSlots.join(', ')} (${FORK.from}'s last page) into ${toSlots.join(', ')} (page ${FORK.page}).`);
    }
    const out = f32(r.steps[i]!.outBits);
    const lse = f32(r.steps[i]!.lseBits);
    const padding = p.tokens - p.queries;
    lines.push('', `step ${i + 1} (${p.name}): ropePoolFused writes ${p.queries} tokens at slots ${p.slots.slice(0, p.queries).join(', ')}${padding ? ` (+${padding} padding, slot -1)` : ''}; pagedAttention, causal:`);
    p.requests.forEach((req, b) => {
      for (let j = 0; j < req.queries; j++) {
        const n = p.qIndptr[b]! + j;
        const head = out.subarray(n * Hq * D, n * Hq * D + 4);
        lines.push(`  ${req.name} query ${j + 1}/${req.queries} over ${req.cached - req.queries + j + 1} of ${req.cached} tokens: out[h0] = ${fixed(head)} …  lse[h0] = ${lse[n * Hq]!.toFixed(4)}`);
      }
    });
  }
  const unchanged = f32(r.wrongOutBits).every((x) => x === PATTERN);
  lines.push('', `wrong calls (the output buffer they were given ${unchanged ? 'is unchanged' : 'CHANGED'}):`);
  for (const w of r.wrongCalls) lines.push(`  ${w.what}: ${w.code ?? 'no code'} ${w.when === 'call' ? 'thrown by the call' : w.when === 'sync' ? 'reported by the next sync()' : 'accepted'}`);
  return lines.join('\n');
}

const report = document.getElementById('report')!;
try {
  window.engineRun = await run();
} catch (e) {
  const error = e as { message?: string; code?: string };
  window.engineRun = { ok: false, error: error?.message ?? String(e), ...(error?.code ? { code: error.code } : {}) };
}
const shown = window.engineRun;
report.textContent = shown.ok ? shown.text : `failed${shown.code ? ` (${shown.code})` : ''}: ${shown.error}`;
