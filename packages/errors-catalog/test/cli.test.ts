import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { explain } from '../src/index.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const { KVKIT_DOCS_BASE: _unset, ...envWithoutDocs } = process.env;
const kvkit = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: envWithoutDocs });

describe('kvkit CLI (built)', () => {
  it('explain prints the whole entry', () => {
    const r = kvkit('explain', 'KV012');
    const e = explain('KV012')!;
    expect(r.status).toBe(0);
    for (const part of [e.title, e.message, e.solutions[0]!, e.example.before.split('\n')[0]!]) expect(r.stdout).toContain(part);
    expect(r.stdout).not.toContain('Docs:');
  });

  it('explain links the docs page only where KVKIT_DOCS_BASE is set', () => {
    const r = spawnSync(process.execPath, [cli, 'explain', 'KV012'], { encoding: 'utf8', env: { ...envWithoutDocs, KVKIT_DOCS_BASE: 'http://localhost:4321/' } });
    expect(r.stdout).toContain('Docs: http://localhost:4321/errors/kv012/');
  });

  it('explain of an unknown code fails and says what to do', () => {
    const r = kvkit('explain', 'KV999');
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('kvkit lookup');
  });

  it('lookup ranks a pasted upstream message', () => {
    const r = kvkit('lookup', 'Invalid stacked eps shape for fused KV materialization: got (), expected (5,).');
    expect(r.status).toBe(0);
    expect(r.stdout.split('\n')[0]).toMatch(/^KV013 /);
  });

  it('lookup reads the message from stdin when none is given', () => {
    const r = spawnSync(process.execPath, [cli, 'lookup'], { input: 'positions/slots must have one entry per token', encoding: 'utf8' });
    expect(r.stdout.split('\n')[0]).toMatch(/^KV034 /);
  });

  it('exits 0, saying nothing, when its reader closes the pipe before the output ends', async () => {
    for (const args of [['list'], ['lookup', 'positions/slots must have one entry per token']]) {
      const child = spawn(process.execPath, [cli, ...args], { env: envWithoutDocs, stdio: ['ignore', 'pipe', 'pipe'] });
      // Closed before the first write: every write the CLI makes meets a closed pipe.
      child.stdout.destroy();
      let stderr = '';
      child.stderr.on('data', (chunk) => (stderr += chunk));
      const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
      expect({ args, status, stderr }).toEqual({ args, status: 0, stderr: '' });
    }
  });

  it('exits 0 piped into head -1, as a shell reports it', () => {
    const r = spawnSync('bash', ['-c', `"${process.execPath}" "${cli}" list | head -1; exit \${PIPESTATUS[0]}`], { encoding: 'utf8', env: envWithoutDocs });
    expect(r.error).toBeUndefined();
    expect(r.stdout).toMatch(/^KV001 /);
    expect(r.stderr).not.toContain('EPIPE');
    expect(r.status).toBe(0);
  });

  it('without a command prints usage', () => {
    const r = kvkit();
    expect(r.status).toBe(0);
    expect(r.stderr).toContain('kvkit explain');
  });
});
