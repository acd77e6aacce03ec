import type { FloatDType } from '../tensor.js';

/** Float dtypes as the kernels number them (a parameter such as `cacheDType` holds one). */
export const FLOAT_CODE: Readonly<Record<FloatDType, number>> = { f32: 0, f16: 1, bf16: 2 };
