import { existsSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { probeCuda } from '../src/index.js';

export const packageRoot = fileURLToPath(new URL('..', import.meta.url));
export const fatbinPath = join(packageRoot, 'dist', 'kvkit.fatbin');
export const ptxasLogPath = join(packageRoot, 'dist', 'kvkit.ptxas.log');

/** nvcc as the package build finds it (PATH, NVCC, CUDA_HOME, /usr/local/cuda), or undefined. */
export function findNvcc(): string | undefined {
  const candidates = [
    process.env.NVCC,
    ...(process.env.PATH ?? '').split(delimiter).map((d) => (d ? join(d, 'nvcc') : undefined)),
    process.env.CUDA_HOME && join(process.env.CUDA_HOME, 'bin', 'nvcc'),
    process.env.CUDA_PATH && join(process.env.CUDA_PATH, 'bin', 'nvcc'),
    '/usr/local/cuda/bin/nvcc',
  ];
  return candidates.find((c): c is string => !!c && existsSync(c));
}

export const nvcc = findNvcc();
if (!nvcc) console.warn('kernels-cuda: nvcc not found, so the kernel build checks (spills, fatbin contents, packed fatbin) are skipped');

/** Whether this machine can run the GPU tests, and why not. */
export const gpu = probeCuda();
if (!gpu.ok) console.warn(`kernels-cuda: GPU tests skipped on this machine: ${gpu.reason}`);

/** One entry of a fatbin: machine code (elf) or PTX, and its sm version. */
export interface FatbinEntry {
  readonly kind: 'elf' | 'ptx';
  readonly sm: number;
}

/** Lists a fatbin's entries (header: magic, version, header size, payload size; then one header + payload per entry). */
export function fatbinEntries(path = fatbinPath): FatbinEntry[] {
  const b = readFileSync(path);
  if (b.readUInt32LE(0) !== 0xba55ed50) throw new Error(`${path} is not a fatbin (magic ${b.readUInt32LE(0).toString(16)})`);
  let at = b.readUInt16LE(6);
  const end = at + Number(b.readBigUInt64LE(8));
  const entries: FatbinEntry[] = [];
  while (at < end) {
    const kind = b.readUInt16LE(at);
    entries.push({ kind: kind === 1 ? 'ptx' : 'elf', sm: b.readUInt32LE(at + 28) });
    at += b.readUInt32LE(at + 4) + Number(b.readBigUInt64LE(at + 8));
  }
  return entries;
}

/** ptxas -v, per entry function and target: spill bytes. */
export interface PtxasFunction {
  readonly name: string;
  readonly target: string;
  readonly spillStores: number;
  readonly spillLoads: number;
  readonly registers: number;
}

export function parsePtxasLog(text: string): PtxasFunction[] {
  const out: PtxasFunction[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const entry = /Compiling entry function '([^']+)' for '(sm_\d+)'/.exec(lines[i]!);
    if (!entry) continue;
    let spills: RegExpExecArray | null = null;
    let registers: RegExpExecArray | null = null;
    for (let j = i + 1; j < lines.length && !/Compiling entry function/.test(lines[j]!); j++) {
      spills ??= /(\d+) bytes spill stores, (\d+) bytes spill loads/.exec(lines[j]!);
      registers ??= /Used (\d+) registers/.exec(lines[j]!);
    }
    if (!spills || !registers) throw new Error(`ptxas log: no spill or register line for ${entry[1]} (${entry[2]})`);
    out.push({ name: entry[1]!, target: entry[2]!, spillStores: Number(spills[1]), spillLoads: Number(spills[2]), registers: Number(registers[1]) });
  }
  return out;
}
