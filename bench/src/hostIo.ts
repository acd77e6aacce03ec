/**
 * Host I/O: how fast data gets into a tensor and back out, per dtype, in GB/s
 * of host data (the bytes of the array given to `tensor()`, or of the array
 * `read()` returns), and the f16/bf16 codec alone for comparison. Every
 * result is checked against the codec before it is timed.
 */
import type { Backend, DType, Tensor } from '@kvkit/contracts';
import { decodeHalves, encodeHalves } from '@kvkit/contracts/backend';
import type { HalfDType } from '@kvkit/contracts/backend';

export const HOST_IO_DTYPES: readonly DType[] = ['f32', 'f16', 'bf16', 'i32', 'i64'];

export interface HostIoRow {
  readonly backend: string;
  /** `tensor()`, `read()`, or the codec's `encode` / `decode`. */
  readonly what: string;
  readonly dtype: DType;
  /** The host array: what tensor() or encode was given, what read() or decode returns. */
  readonly host: string;
  readonly bytes: number;
  /** By wall-clock time: median, fastest and slowest of the repeats. */
  readonly gbs: { readonly median: number; readonly min: number; readonly max: number };
  readonly medianMs: number;
  /** By the process's CPU time (all its threads), median of the repeats: what a core does, on a busy machine too. */
  readonly cpuGbs: number;
}

/** One timed run: wall-clock and process CPU milliseconds. */
interface Timing {
  readonly wallMs: number;
  readonly cpuMs: number;
}

async function timed(fn: () => unknown): Promise<Timing> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const wallMs = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { wallMs, cpuMs: (c.user + c.system) / 1e3 };
}

/** Random host data for `dtype`: floats in ±4 as a Float32Array, i32 and i64 over their whole range. */
export function hostData(dtype: DType, n: number, seed = 1): Float32Array | Int32Array | BigInt64Array {
  let s = seed >>> 0 || 1;
  const next = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return s | 0;
  };
  if (dtype === 'i32') return Int32Array.from({ length: n }, next);
  if (dtype === 'i64') {
    const out = new BigInt64Array(n);
    const words = new Int32Array(out.buffer);
    for (let i = 0; i < words.length; i++) words[i] = next();
    return out;
  }
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = next() / 2 ** 29;
  return out;
}

/** What read() must give back for `data` stored as `dtype`. */
function expected(dtype: DType, data: Float32Array | Int32Array | BigInt64Array): ArrayLike<number | bigint> {
  if (dtype !== 'f16' && dtype !== 'bf16') return data;
  const bits = new Uint16Array(data.length);
  encodeHalves(dtype, data as Float32Array, bits);
  return decodeHalves(dtype, bits);
}

function sameElements(a: ArrayLike<number | bigint>, b: ArrayLike<number | bigint>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

const median = (xs: readonly number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

function summarise(backend: string, what: string, dtype: DType, host: string, bytes: number, runs: readonly Timing[]): HostIoRow {
  const rates = runs.map((r) => bytes / r.wallMs / 1e6);
  return {
    backend,
    what,
    dtype,
    host,
    bytes,
    gbs: { median: median(rates), min: Math.min(...rates), max: Math.max(...rates) },
    medianMs: median(runs.map((r) => r.wallMs)),
    cpuGbs: median(runs.map((r) => bytes / Math.max(r.cpuMs, 1e-3) / 1e6)),
  };
}

/** tensor() (until the data has landed) and read(), per dtype: one checked round trip first, then `repeats` timed ones. */
export async function measureBackendIo(name: string, backend: Backend, n: number, repeats: number, dtypes = HOST_IO_DTYPES): Promise<HostIoRow[]> {
  const rows: HostIoRow[] = [];
  for (const dtype of dtypes) {
    const data = hostData(dtype, n, 7 + dtype.length);
    const want = expected(dtype, data);
    const probe = backend.tensor(dtype, [n], data);
    const back = await backend.read(probe);
    probe.dispose();
    if (!sameElements(back, want)) throw new Error(`${name}: ${dtype} tensor() then read() did not give back the stored values`);
    const up: Timing[] = [];
    const down: Timing[] = [];
    for (let r = 0; r < repeats; r++) {
      let t: Tensor | undefined;
      up.push(
        await timed(async () => {
          t = backend.tensor(dtype, [n], data);
          await backend.sync(); // until the data has landed
        }),
      );
      down.push(await timed(() => backend.read(t!)));
      t!.dispose();
    }
    rows.push(summarise(name, 'tensor()', dtype, data.constructor.name, data.byteLength, up));
    rows.push(summarise(name, 'read()', dtype, back.constructor.name, back.byteLength, down));
  }
  return rows;
}

/** The f16/bf16 codec alone: encode from a Float32Array, a Float64Array and a number[], decode to a Float32Array. */
export async function measureCodec(n: number, repeats: number): Promise<HostIoRow[]> {
  const rows: HostIoRow[] = [];
  const narrow = hostData('f32', n, 3) as Float32Array;
  const wide = Float64Array.from(narrow, (x, i) => x + (i % 7) * 2 ** -40);
  const list = Array.from(wide);
  const bits = new Uint16Array(n);
  const values = new Float32Array(n);
  const time = async (fn: () => void): Promise<Timing[]> => {
    for (let w = 0; w < 2; w++) fn(); // warm-up, so the timings see optimised code
    const runs: Timing[] = [];
    for (let r = 0; r < repeats; r++) runs.push(await timed(fn));
    return runs;
  };
  for (const dtype of ['f16', 'bf16'] as HalfDType[]) {
    rows.push(summarise('codec', 'encode', dtype, 'Float32Array', 4 * n, await time(() => encodeHalves(dtype, narrow, bits))));
    rows.push(summarise('codec', 'encode', dtype, 'Float64Array', 8 * n, await time(() => encodeHalves(dtype, wide, bits))));
    rows.push(summarise('codec', 'encode', dtype, 'number[] (8 B each)', 8 * n, await time(() => encodeHalves(dtype, list, bits))));
    rows.push(summarise('codec', 'decode', dtype, 'Float32Array', 4 * n, await time(() => decodeHalves(dtype, bits, values))));
  }
  return rows;
}

export function hostIoTable(rows: readonly HostIoRow[]): string {
  const lines = [
    '| backend | call | dtype | host array | GB/s (wall, median) | spread | ms (median) | GB/s per CPU-second |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const r of rows) {
    const spread = `${r.gbs.min.toFixed(2)}–${r.gbs.max.toFixed(2)}`;
    lines.push(`| ${r.backend} | ${r.what} | ${r.dtype} | ${r.host} | ${r.gbs.median.toFixed(2)} | ${spread} | ${r.medianMs.toFixed(1)} | ${r.cpuGbs.toFixed(2)} |`);
  }
  return `${lines.join('\n')}\n`;
}
