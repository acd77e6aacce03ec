import { defineConfig } from 'vite';

// es2022: the page awaits at the top level of its module.
export default defineConfig({ build: { target: 'es2022' } });
