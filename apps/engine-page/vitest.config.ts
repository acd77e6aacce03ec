import { defineConfig, mergeConfig } from 'vitest/config';
import shared from '../../vitest.shared.ts';

export default mergeConfig(
  shared,
  defineConfig({
    test: {
      // beforeAll builds the page and starts Chromium, which is slow on a 2-core machine.
      hookTimeout: 120_000,
    },
  }),
);
