import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './paths.js';

/** What the docs read from a package's package.json. */
export interface PackageInfo {
  /** `@kvkit/kernels-wgsl` */
  name: string;
  /** `kernels-wgsl`: the folder under packages/, and the page slug under /api/. */
  dir: string;
  version: string;
  description: string;
  /** Entry points a user imports, from `exports`: `.` and subpaths, each with the source file it is built from. */
  entries: { specifier: string; subpath: string; source: string }[];
  /** Commands of `bin`, by name. */
  bin: Record<string, string>;
  /** The optional peer dependencies, by name: e.g. `webgpu` for Dawn in Node. */
  peers: Record<string, string>;
}

interface PackageJson {
  name: string;
  version: string;
  description?: string;
  private?: boolean;
  exports?: Record<string, string | { import?: string; types?: string }>;
  bin?: string | Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/** `./dist/runtime/x.js` -> `src/runtime/x.ts`: every package builds `src/` into `dist/` with tsc. */
const sourceOf = (built: string) => built.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts');

/**
 * The published packages (every `packages/*` that is not private), in the order a user meets them: the
 * contracts, the backends, the catalog. Read from the package.json files at build time.
 */
export function publicPackages(): PackageInfo[] {
  const dirs = readdirSync(join(repoRoot, 'packages'), { withFileTypes: true }).filter((d) => d.isDirectory());
  const found: PackageInfo[] = [];
  for (const d of dirs) {
    let pkg: PackageJson;
    try {
      pkg = JSON.parse(readFileSync(join(repoRoot, 'packages', d.name, 'package.json'), 'utf8')) as PackageJson;
    } catch {
      continue;
    }
    if (pkg.private) continue;
    const entries = Object.entries(pkg.exports ?? {}).flatMap(([subpath, target]) => {
      const built = typeof target === 'string' ? target : target.import;
      if (!built?.endsWith('.js')) return [];
      return [{ specifier: subpath === '.' ? pkg.name : `${pkg.name}/${subpath.replace(/^\.\//, '')}`, subpath, source: `packages/${d.name}/${sourceOf(built)}` }];
    });
    const bin = typeof pkg.bin === 'string' ? { [pkg.name.split('/').pop()!]: pkg.bin } : (pkg.bin ?? {});
    found.push({ name: pkg.name, dir: d.name, version: pkg.version, description: pkg.description ?? '', entries, bin, peers: pkg.peerDependencies ?? {} });
  }
  return found.sort((a, b) => rank(a.dir) - rank(b.dir) || a.dir.localeCompare(b.dir));
}

const ORDER = ['contracts', 'kernels-cpu', 'kernels-wgsl', 'kernels-cuda', 'errors-catalog'];
const rank = (dir: string) => (ORDER.includes(dir) ? ORDER.indexOf(dir) : ORDER.length);

/**
 * The version line of the site: `0.1.0` when every published package is at one version, else each package's own
 * (`@kvkit/contracts 0.2.0, @kvkit/kernels-cpu 0.1.1, …`).
 */
export function versionLine(packages: readonly PackageInfo[] = publicPackages()): string {
  const versions = new Set(packages.map((p) => p.version));
  return versions.size === 1 ? `kvkit ${[...versions][0]}` : packages.map((p) => `${p.name} ${p.version}`).join(', ');
}
