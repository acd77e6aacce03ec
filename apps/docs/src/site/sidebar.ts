import type { OpDecl } from '@kvkit/contracts/dsl';
import type { CatalogEntry } from '@kvkit/errors-catalog';
import { apiIndexPath, apiPath, benchmarksPath, changelogPath, contractErrorPath, errorPath, gettingStartedPath, kernelsPath, lookupPath, opPath, tryPath } from './routes.js';

interface SidebarLink {
  label: string;
  link: string;
  badge?: { text: string; variant: 'caution' };
}
interface SidebarGroup {
  label: string;
  collapsed?: boolean;
  items: SidebarLink[];
}

/**
 * The navigation, from the catalog, the op declarations and the published packages; Starlight prefixes the base
 * path. Its order is the order of the previous/next links at the foot of every page: the guide first (install,
 * the errors, the rules), then the reference (the API per package, the ops, the codes), then the rest.
 */
export function sidebar(entries: readonly CatalogEntry[], ops: readonly OpDecl[], packages: readonly { name: string; dir: string }[]): (SidebarLink | SidebarGroup)[] {
  return [
    { label: 'Getting started', link: `/${gettingStartedPath}` },
    { label: 'Reading a ContractError', link: `/${contractErrorPath}` },
    { label: 'Look up an error message', link: `/${lookupPath}` },
    { label: 'Try it in your browser', link: `/${tryPath}` },
    { label: 'What every op promises', link: '/semantics/' },
    {
      label: 'API reference',
      items: [{ label: 'All packages', link: `/${apiIndexPath}` }, ...packages.map((p) => ({ label: p.name, link: `/${apiPath(p.dir)}` }))],
    },
    {
      label: 'Ops',
      items: [{ label: 'All ops', link: '/ops/' }, ...ops.map((op) => ({ label: op.name, link: `/${opPath(op.name)}` }))],
    },
    {
      label: 'RoPE variants',
      items: [
        ...ropeVariants(ops).map((tag) => ({ label: tag, link: `/rope/${tag}/` })),
        { label: 'exact and float32 angles', link: '/rope/exact-angles/' },
        { label: 'mRoPE (multimodal)', link: '/rope/mrope/' },
        { label: 'mRoPE, interleaved (Qwen3-VL)', link: '/rope/mrope-interleaved/' },
        { label: 'Q/K-norm before RoPE', link: '/rope/qk-norm/' },
      ],
    },
    {
      label: 'Error codes',
      collapsed: true,
      items: [
        { label: 'All codes', link: '/errors/' },
        ...entries.map((e) => ({
          label: `${e.code} ${e.title}`,
          link: `/${errorPath(e.code)}`,
          ...(e.retired ? { badge: { text: 'retired', variant: 'caution' as const } } : {}),
        })),
      ],
    },
    { label: 'Kernels and their launches', link: `/${kernelsPath}` },
    { label: 'Benchmarks', link: `/${benchmarksPath}` },
    { label: 'Changelog', link: `/${changelogPath}` },
  ];
}

/** The declared `ropeScaling` variants (each has its page under src/content/docs/rope/). */
export function ropeVariants(ops: readonly OpDecl[]): string[] {
  for (const op of ops) for (const step of op.steps) if (step.kind === 'tagged' && step.name === 'ropeScaling') return Object.keys(step.variants);
  return [];
}
