#!/usr/bin/env node
// Builds src/cuda/kvkit.cu into dist/kvkit.fatbin with nvcc: machine code for
// sm_80 and sm_90 plus compute_90 PTX (newer GPUs JIT it). ptxas's report goes
// to dist/kvkit.ptxas.log (the tests read it for spills). Without nvcc the
// build still succeeds, says so, and leaves no fatbin: createCudaBackend()
// then rejects with KV052.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');
const fatbin = join(dist, 'kvkit.fatbin');
const log = join(dist, 'kvkit.ptxas.log');
const NVCC_FLAGS = [
  '-fatbin',
  '-O3',
  '-std=c++17',
  '--threads',
  '0',
  '-Xptxas',
  '-v',
  '-gencode',
  'arch=compute_80,code=sm_80',
  '-gencode',
  'arch=compute_90,code=sm_90',
  '-gencode',
  'arch=compute_90,code=compute_90',
];

function findNvcc() {
  const candidates = [
    process.env.NVCC,
    ...(process.env.PATH ?? '').split(delimiter).map((d) => d && join(d, 'nvcc')),
    process.env.CUDA_HOME && join(process.env.CUDA_HOME, 'bin', 'nvcc'),
    process.env.CUDA_PATH && join(process.env.CUDA_PATH, 'bin', 'nvcc'),
    '/usr/local/cuda/bin/nvcc',
  ];
  return candidates.find((c) => c && existsSync(c));
}

mkdirSync(dist, { recursive: true });
const nvcc = findNvcc();
if (!nvcc) {
  rmSync(fatbin, { force: true });
  rmSync(log, { force: true });
  console.warn(
    '[@kvkit/kernels-cuda] nvcc was not found (PATH, NVCC, CUDA_HOME, /usr/local/cuda): the CUDA kernels were NOT built, ' +
      'so dist/kvkit.fatbin is absent and createCudaBackend() will reject with KV052. Install the CUDA toolkit and rebuild to get them.',
  );
  process.exit(0);
}

const started = Date.now();
const result = spawnSync(nvcc, [...NVCC_FLAGS, join(root, 'src', 'cuda', 'kvkit.cu'), '-o', fatbin], { encoding: 'utf8' });
writeFileSync(log, `${result.stdout ?? ''}${result.stderr ?? ''}`);
if (result.status !== 0) {
  rmSync(fatbin, { force: true });
  console.error(`${result.stdout ?? ''}${result.stderr ?? ''}`);
  console.error(`[@kvkit/kernels-cuda] nvcc failed (${result.error?.message ?? `exit ${result.status}`}); see above.`);
  process.exit(1);
}
console.log(`[@kvkit/kernels-cuda] built dist/kvkit.fatbin with ${nvcc} in ${((Date.now() - started) / 1000).toFixed(1)} s (sm_80, sm_90, compute_90 PTX)`);
