import { createCpuBackend } from '@kvkit/kernels-cpu';
import { defineConformanceSuite, definePropertySuite, defineValidationSuite } from '../src/index.js';

defineConformanceSuite('cpu', createCpuBackend, { dtypes: ['f32', 'f16', 'bf16'] });
defineValidationSuite('cpu', createCpuBackend);
definePropertySuite('cpu', createCpuBackend);
