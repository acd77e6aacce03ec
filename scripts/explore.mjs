#!/usr/bin/env node
// Runs every property suite with fresh seeds (KVKIT_PROPERTY_SEED=random, or the
// seed given there), `--repeat <n>` times: the test files that take their seeds
// from propertySeeds.js, directly or through @kvkit/conformance's suites. Each
// run prints its seeds; a failure names the one that replays it.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const USES_SEEDS = /propertySeeds\.js|definePropertySuite\(|defineValidationSuite\(/;

const args = process.argv.slice(2);
const at = args.indexOf('--repeat');
const repeat = at < 0 ? 1 : Number(args[at + 1]);
if (!Number.isSafeInteger(repeat) || repeat < 1) {
  console.error('usage: pnpm test:explore [--repeat <n>]');
  process.exit(2);
}

const packages = ['packages', 'apps', 'tools']
  .flatMap((d) => (existsSync(join(root, d)) ? readdirSync(join(root, d)).map((p) => join(root, d, p)) : []))
  .concat(join(root, 'bench'));
const suites = packages
  .map((dir) => {
    const tests = join(dir, 'test');
    const files = existsSync(tests) ? readdirSync(tests).filter((f) => f.endsWith('.test.ts') && USES_SEEDS.test(readFileSync(join(tests, f), 'utf8'))) : [];
    return { dir, files: files.map((f) => `test/${f}`) };
  })
  .filter((s) => s.files.length > 0);

const built = spawnSync('pnpm', ['exec', 'turbo', 'run', 'build', '--output-logs=errors-only'], { cwd: root, stdio: 'inherit', env: { ...process.env, TURBO_TELEMETRY_DISABLED: '1' } });
if (built.status !== 0) process.exit(built.status ?? 1);

const env = { ...process.env, KVKIT_PROPERTY_SEED: process.env.KVKIT_PROPERTY_SEED || 'random' };
const failed = [];
for (let run = 1; run <= repeat; run++) {
  for (const { dir, files } of suites) {
    const where = dir.slice(root.length);
    console.log(`\n== explore ${run}/${repeat}: ${where} ${files.join(' ')}`);
    const r = spawnSync('pnpm', ['exec', 'vitest', 'run', ...files], { cwd: dir, stdio: 'inherit', env });
    if (r.status !== 0) failed.push(`${where} (run ${run})`);
  }
}
console.log(`\n${suites.length * repeat - failed.length} suite runs passed, ${failed.length} failed${failed.length ? `: ${failed.join(', ')}` : ''}`);
process.exit(failed.length === 0 ? 0 : 1);
