import { defineConfig, mergeConfig } from 'vitest/config';
import shared from '../../vitest.shared.ts';

export default mergeConfig(
  shared,
  defineConfig({
    test: {
      globalSetup: ['test/global-setup.ts'],
      // beforeAll hooks start Chromium, which is slow on a 2-core machine.
      hookTimeout: 60_000,
    },
  }),
);
