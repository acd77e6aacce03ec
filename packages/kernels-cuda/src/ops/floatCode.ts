import type { FloatDType } from '@kvkit/contracts';

/** Float dtypes as the kernels number them (FloatCode in storage.cuh). */
export const FLOAT_CODE: Readonly<Record<FloatDType, number>> = { f32: 0, f16: 1, bf16: 2 };
