import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const docsRoot = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Builds the site with `astro build` into `outDir`; resolves with the build's wall time in ms. `--force` syncs
 * the content collections afresh: built again over the package build's content store, the site once came out
 * without the ops' prose (the store it rewrote had lost that collection).
 */
export function buildSite(outDir: string, env: Record<string, string>): Promise<number> {
  const astro = join(docsRoot, 'node_modules', 'astro', 'astro.js');
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [astro, 'build', '--force', '--outDir', outDir], {
      cwd: docsRoot,
      env: { ...cleanEnv(), ASTRO_TELEMETRY_DISABLED: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout.on('data', (d) => (log += d));
    child.stderr.on('data', (d) => (log += d));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(Date.now() - started) : reject(new Error(`astro build failed (${code}):\n${log.slice(-4000)}`))));
  });
}

/** The environment without what Vitest adds to it: Vite would read its BASE_URL and MODE as the site's own. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of Object.keys(env)) if (/^(VITEST|VITE_)/.test(key) || ['BASE_URL', 'MODE', 'DEV', 'PROD', 'SSR', 'TEST', 'NODE_ENV'].includes(key)) delete env[key];
  return env;
}

/** Every file under `dir`, as paths relative to it with `/` separators. */
export function listFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => relative(dir, join(d.parentPath, d.name)).split(sep).join('/'));
}

/** The file a site path (after the base) is served from: `errors/kv012/` -> `errors/kv012/index.html`. */
export function fileForPath(dir: string, path: string): string | undefined {
  const clean = normalize(decodeURIComponent(path)).replace(/^(\.\.(\/|\\|$))+/, '');
  const candidates = clean.endsWith('/') || clean === '' || clean === '.' ? [join(clean, 'index.html')] : [clean, join(clean, 'index.html')];
  for (const c of candidates) {
    const full = join(dir, c);
    if (existsSync(full) && statSync(full).isFile()) return full;
  }
  return undefined;
}

/** The HTML of the built page at `path` under `dir`, or undefined where none is built. */
export function pageAt(dir: string, path: string): string | undefined {
  const file = fileForPath(dir, path);
  return file === undefined ? undefined : readFileSync(file, 'utf8');
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.wasm': 'application/wasm',
};

/** A static server for the built site mounted at `base` (node:http, a free port); 404s answer with the site's 404 page. */
export async function serveSite(dir: string, base: string): Promise<{ origin: string; server: Server }> {
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    const file = path.startsWith(base) ? fileForPath(dir, path.slice(base.length)) : undefined;
    if (!file) {
      res.writeHead(404, { 'content-type': TYPES['.html']! });
      res.end(existsSync(join(dir, '404.html')) ? readFileSync(join(dir, '404.html')) : 'not found');
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
    res.end(readFileSync(file));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { origin: `http://127.0.0.1:${port}`, server };
}
