#!/usr/bin/env node
// Runs every package's typecheck, tests and lint through turbo, then sums the
// vitest reports into one closing line, so a run is judged by its counts.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const packages = [
  ...['packages', 'apps', 'tools'].flatMap((d) => (existsSync(join(root, d)) ? readdirSync(join(root, d)).map((p) => join(root, d, p)) : [])),
  join(root, 'bench'),
];
const reportOf = (p) => join(p, '.test-results', 'vitest.json');
for (const p of packages) rmSync(reportOf(p), { force: true });

// Fresh property seeds (KVKIT_PROPERTY_SEED=random) make a run no cached one can stand for.
const fresh = process.env.KVKIT_PROPERTY_SEED === 'random' ? ['--force'] : [];
const turbo = spawnSync('pnpm', ['exec', 'turbo', 'run', 'typecheck', 'test', 'lint', '--continue', ...fresh, ...process.argv.slice(2)], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, TURBO_TELEMETRY_DISABLED: '1' },
});

let passed = 0;
let failed = 0;
let skipped = 0;
const rows = [];
for (const p of packages) {
  if (!existsSync(reportOf(p))) continue;
  const r = JSON.parse(readFileSync(reportOf(p), 'utf8'));
  passed += r.numPassedTests;
  failed += r.numFailedTests + (r.numFailedTestSuites ?? 0) - countFailedSuitesWithTests(r);
  skipped += r.numPendingTests + r.numTodoTests;
  rows.push(`  ${p.slice(root.length).padEnd(28)} ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests} skipped`);
}
console.log(`\nkvkit tests by package:\n${rows.join('\n')}`);
if (turbo.status !== 0 && failed === 0) failed = 1; // a typecheck, lint or build failure counts too
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(turbo.status === 0 && failed === 0 ? 0 : 1);

// A suite that failed to load has no test results; one that ran failing tests is already counted.
function countFailedSuitesWithTests(r) {
  return r.testResults.filter((s) => s.status === 'failed' && s.assertionResults.length > 0).length;
}
