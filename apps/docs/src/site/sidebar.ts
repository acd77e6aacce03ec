import type { OpDecl } from '@kvkit/contracts/dsl';
import type { CatalogEntry } from '@kvkit/errors-catalog';
import { benchmarksPath, errorPath, kernelsPath, lookupPath, opPath } from './routes.js';

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

/** The navigation, from the catalog and the op declarations; Starlight prefixes the base path. */
export function sidebar(entries: readonly CatalogEntry[], ops: readonly OpDecl[]): (SidebarLink | SidebarGroup)[] {
  return [
    { label: 'Look up an error message', link: `/${lookupPath}` },
    { label: 'What every op promises', link: '/semantics/' },
    { label: 'Reading a ContractError', link: '/contract-error/' },
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
  ];
}

/** The declared `ropeScaling` variants (each has its page under src/content/docs/rope/). */
export function ropeVariants(ops: readonly OpDecl[]): string[] {
  for (const op of ops) for (const step of op.steps) if (step.kind === 'tagged' && step.name === 'ropeScaling') return Object.keys(step.variants);
  return [];
}
