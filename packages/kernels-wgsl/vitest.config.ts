import { defineConfig, mergeConfig } from 'vitest/config';
import shared from '../../vitest.shared.ts';
import { wgslMinifyPlugin } from './scripts/wgslMinify.ts';

// The kernels' WGSL minified as the build minifies it (scripts/build.ts): the tests run the shaders that ship.
export default mergeConfig(shared, defineConfig({ plugins: [wgslMinifyPlugin()] }));
