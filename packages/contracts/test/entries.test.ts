import { describe, expect, it } from 'vitest';
import * as backend from '../src/backend/index.js';
import * as dsl from '../src/dsl/index.js';
import * as root from '../src/index.js';

describe('entry points', () => {
  it('names that moved to /backend and /dsl in 0.2 still resolve from the root entry, as the same objects', () => {
    expect([root.defineBackend, root.deliverLayerViews, root.isTensor, root.LAYER_VIEW, root.TENSOR_OWNER]).toEqual([
      backend.defineBackend,
      backend.deliverLayerViews,
      backend.isTensor,
      backend.LAYER_VIEW,
      backend.TENSOR_OWNER,
    ]);
    expect(root.defineBackend).toBe(backend.defineBackend);
    expect(root.allOps).toBe(dsl.allOps);
    expect(root.allErrors).toBe(dsl.allErrors);
  });

  it('the user entry carries errors and tensors, not the backend layer', () => {
    expect(typeof root.ContractError).toBe('function');
    expect(root.DTYPES).toContain('bf16');
    for (const name of ['Workspace', 'OpLifecycle', 'ropeAngles', 'encodeHalves', 'valueRuleError']) expect(Object.keys(root), name).not.toContain(name);
  });
});
