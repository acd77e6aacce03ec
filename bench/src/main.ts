/**
 * `pnpm bench`: every GPU backend found on this machine, each against the
 * ceilings measured in the same run, plus the peers' figures when a peers
 * file from the same device session is given:
 *   pnpm bench [--backends cuda,webgpu] [--dtypes bf16,f16,f32] [--only regex] [--peers peers.json] [--out dir] [--host-io-elements N]
 *              [--wgsl-tuning '{"pairedNormLanes":false}']   (WebGPU kernel-shape choices other than the defaults, to compare them)
 *              [--cuda-tuning '{"overlapLayersPerStage":2}']   (CUDA scheduling choices other than the defaults: src/ops/tuning.ts)
 *              [--paged-tuning '{"pieceCost":0}']   (CUDA pagedAttention split rules other than the defaults: src/ops/pagedAttention.ts)
 * Every row is timed three times; host I/O (tensor() and read() per dtype) is
 * measured on each backend after its rows. Writes
 * bench/results/<date>-<gpu>.json and .md (and the same into --out).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { probeCuda } from '@kvkit/kernels-cuda';
import { probeWebGpu } from '@kvkit/kernels-wgsl';
import { tuning as wgslTuning } from '@kvkit/kernels-wgsl/profiling';
import { pagedTuning, tuning as cudaTuning } from '@kvkit/kernels-cuda/profiling';
import type { FloatDType } from '@kvkit/contracts';
import { FLOAT_DTYPES } from '@kvkit/contracts';
import { measureBackendIo, measureCodec } from './hostIo.js';
import type { HostIoRow } from './hostIo.js';
import { cudaProfiler, webGpuProfiler } from './profilers.js';
import type { Profiler } from './profilers.js';
import { markdownTable } from './results.js';
import type { BenchResults, Ceiling, ResultRow } from './results.js';
import { runBackend } from './run.js';

const { values } = parseArgs({
  options: {
    backends: { type: 'string', default: 'cuda,webgpu' },
    peers: { type: 'string' },
    out: { type: 'string' },
    results: { type: 'string' },
    dtypes: { type: 'string', default: 'bf16,f16,f32' },
    only: { type: 'string' },
    'host-io-elements': { type: 'string', default: String(16 * 1024 * 1024) },
    'wgsl-tuning': { type: 'string' },
    'cuda-tuning': { type: 'string' },
    'paged-tuning': { type: 'string' },
  },
});
if (values['wgsl-tuning']) Object.assign(wgslTuning, JSON.parse(values['wgsl-tuning']));
if (values['cuda-tuning']) Object.assign(cudaTuning, JSON.parse(values['cuda-tuning']));
if (values['paged-tuning']) Object.assign(pagedTuning, JSON.parse(values['paged-tuning']));
const dtypes = (values.dtypes ?? '').split(',').filter(Boolean) as FloatDType[];
for (const d of dtypes) if (!FLOAT_DTYPES.includes(d)) throw new Error(`--dtypes: ${d} is not one of ${FLOAT_DTYPES.join(', ')}`);
const hostIoElements = Number(values['host-io-elements']);
const wanted = new Set((values.backends ?? '').split(',').filter(Boolean));
const log = (line: string) => console.log(line);

const found: { name: string; make: () => Promise<Profiler> }[] = [];
let gpu = 'no GPU';
let driver = 'none';
if (wanted.has('cuda')) {
  const cuda = probeCuda();
  if (cuda.ok && cuda.devices.length > 0) {
    found.push({ name: 'cuda', make: cudaProfiler });
    gpu = cuda.devices[0]?.name ?? gpu;
    driver = `CUDA driver ${cuda.driverVersion}`;
  } else log(`cuda: not benchmarked: ${cuda.ok ? 'no device' : cuda.reason}`);
}
if (wanted.has('webgpu')) {
  const webgpu = await probeWebGpu({ powerPreference: 'high-performance' });
  if (webgpu.ok && !webgpu.software) {
    found.push({ name: 'webgpu', make: webGpuProfiler });
    if (gpu === 'no GPU') gpu = webgpu.description;
  } else log(`webgpu: not benchmarked: ${webgpu.ok ? `${webgpu.description} is a software rasteriser; its timings say nothing about a GPU` : webgpu.reason}`);
}
if (found.length === 0) {
  log('No GPU backend found: nothing to measure (the CPU reference has no speed target). Run this on a machine with an NVIDIA GPU.');
  process.exit(0);
}

const ceilings: Ceiling[] = [];
const rows: ResultRow[] = [];
const notes: string[] = [];
const hostIo: HostIoRow[] = [];
if (values.peers) {
  const peers = JSON.parse(readFileSync(values.peers, 'utf8')) as Pick<BenchResults, 'ceilings' | 'rows' | 'notes'>;
  ceilings.push(...peers.ceilings);
  rows.push(...peers.rows);
  notes.push(...peers.notes);
}

const date = new Date().toISOString().slice(0, 10);
const file = `${date}-${gpu.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '')}`;
const here = dirname(fileURLToPath(import.meta.url));
const dirs = [values.results ?? join(here, '..', 'results'), ...(values.out ? [values.out] : [])];
/** Written after every backend, so a run cut short still leaves what it measured. */
const save = (): BenchResults => {
  const results: BenchResults = { schema: 1, date, gpu, driver, notes, ceilings, rows, ...(hostIo.length ? { hostIo } : {}) };
  for (const dir of dirs) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${file}.json`), `${JSON.stringify(results, null, 2)}\n`);
    writeFileSync(join(dir, `${file}.md`), markdownTable(results));
  }
  return results;
};

/** Wall-clock seconds since `from` (performance.now() milliseconds), for the log. */
const secondsSince = (from: number) => `${((performance.now() - from) / 1e3).toFixed(1)} s`;
const benchStarted = performance.now();
for (const { name, make } of found) {
  const started = performance.now();
  const profiler = await make();
  try {
    const run = await runBackend(profiler, log, { dtypes, ...(values.only ? { only: new RegExp(values.only) } : {}) });
    ceilings.unshift(...run.ceilings);
    rows.unshift(...run.rows);
    notes.push(...run.notes);
    log(`${name}: ${run.rows.length} rows in ${secondsSince(started)}`);
    if (hostIoElements > 0) {
      const ioStarted = performance.now();
      if (hostIo.length === 0) hostIo.push(...(await measureCodec(hostIoElements, 3)));
      hostIo.push(...(await measureBackendIo(name, profiler.backend, hostIoElements, 3)));
      log(`${name}: host I/O in ${secondsSince(ioStarted)}`);
    }
  } catch (e) {
    notes.push(`${name}: the run stopped: ${e instanceof Error ? e.message : String(e)}`);
    log(`${name}: the run stopped: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  } finally {
    profiler.backend.dispose();
  }
  save();
}
log(`\n${markdownTable(save())}\nwritten: ${dirs.map((d) => join(d, `${file}.json`)).join(', ')} (every backend in ${secondsSince(benchStarted)})`);
