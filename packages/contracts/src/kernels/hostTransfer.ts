/** The kernels behind host transfers of f16/bf16 tensors, so the host moves f32 and never runs the codec per element. */
import { cudaKernel, i64, input, output } from './declare.js';

const HALF_DTYPES = ['f16', 'bf16'] as const;

export const halvesCuda = cudaKernel({
  kernel: 'halves',
  struct: 'HalvesParams',
  doc: "f32 values rounded to f16/bf16 after an upload, and f16/bf16 widened to f32 before a download, with the host codec's rounding and NaN rules bit for bit (halves.cu).",
  params: {
    src: input('void', '[count]: f32 (to halves) or the halves (to f32)'),
    dst: output('void', '[count]'),
    count: i64('elements'),
  },
  launches: { default: { threads: 256, doc: 'grid-stride, one element per step' } },
  entries: HALF_DTYPES.flatMap((dtype) => [
    { name: `halves_from_f32_${dtype}`, launch: 'default', dtype },
    { name: `halves_to_f32_${dtype}`, launch: 'default', dtype },
  ]),
});
