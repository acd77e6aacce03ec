import { catalog } from './catalog.js';
import type { CatalogEntry } from './entry.js';

/** One entry `lookup()` found for a message, with how well it matched. */
export interface LookupMatch {
  /** The catalog entry found. */
  entry: CatalogEntry;
  /** How well the text matches, in [0, 1]; 1 for a code named in the text. */
  score: number;
}

/**
 * Ranks entries for any pasted message, best first.
 *
 * - A code named in the text (`KV012`) wins outright.
 * - Our own messages are recognised by their template, but a template counts
 *   only as much as its literal text is specific: `{arg}: {problem}` alone
 *   proves nothing, so it needs the argument it names to be one this code
 *   checks.
 * - Everything else, upstream wordings included, is matched term by term:
 *   words (split at camelCase and snake_case, stemmed), word pairs, and
 *   identifiers (`mrope_section` and `mropeSection` are one term, upstream
 *   names map to ours: `pos_ids` is `positions`), with accessors kept
 *   (`positions.shape[0]`, `.size(0)` and `.numel()` are one term). Each term
 *   weighs by how rare it is across the catalog, identifiers and accessors
 *   double; the score is the weighted overlap (a cosine) with the entry's
 *   message, each of its upstream wordings, or (at 0.6) its prose.
 */
export function lookup(text: string, limit = 10): LookupMatch[] {
  const named = [...text.matchAll(/\bKV(\d{3})\b/gi)].map((m) => `KV${m[1]}`);
  const exact = catalog.filter((e) => named.includes(e.code)).map((entry) => ({ entry, score: 1 }));
  const idx = index();
  const query = weigh(idx.weights, termsOf(text, idx.argNames));
  const ranked = idx.entries
    .map(({ entry, fields, template, upstream, all }) => {
      const words = Math.max(...fields.map((f) => cosine(query, f.vec) * f.weight));
      const wordScore = (1 - COVERAGE_SHARE) * words + COVERAGE_SHARE * coverage(query, all) * words ** 0.5;
      const templates = Math.max(templateScore(template, entry, text), ...upstream.map((t) => upstreamScore(t, text)));
      return { entry, score: Math.min(0.99, Math.max(templates, wordScore)) };
    })
    .filter((m) => m.score > MIN_SCORE && !named.includes(m.entry.code))
    .sort((a, b) => b.score - a.score || a.entry.code.localeCompare(b.entry.code));
  return [...exact, ...ranked].slice(0, limit);
}

/** Below this a match is noise: a shared common word or two. */
const MIN_SCORE = 0.08;
/** Identifiers and accessors weigh this much more than a word of the same rarity. */
const IDENTIFIER_WEIGHT = 2;
/** Weight of the prose (meaning, when it happens) against the message and upstream wordings. */
const PROSE_WEIGHT = 0.6;
/**
 * Share of the word score that rewards an entry for covering the query's
 * terms across all its fields (an identifier in its message, another in its
 * prose), damped by the best single field so scattered common words do not add up.
 */
const COVERAGE_SHARE = 0.35;

const STOP = new Set(
  'a an the of for to in on is are be must got expected expect was were it its this that with and or not as by at from has have one per use see kvkit'.split(' '),
);

/** Lower-case words of a message, split at camelCase and snake_case, numbers and placeholders dropped. */
export function words(text: string): string[] {
  return text
    .replace(/\{\w+\}/g, ' ')
    .replace(/https?:\/\/\S+/g, ' ')
    .replace(/\b(?:run )?npx kvkit explain \S+/gi, ' ')
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z]+/)
    .filter((w) => w.length > 1 && !STOP.has(w))
    .map(stem);
}

/** Plural and tense endings off, so `positions` meets `position` and `summing` meets `sum`. */
function stem(w: string): string {
  if (w.length > 4 && w.endsWith('ies')) return `${w.slice(0, -3)}y`;
  if (w.length > 5 && w.endsWith('ing')) return w.slice(0, -3).replace(/([b-df-hj-np-tv-z])\1$/, '$1');
  if (w.length > 3 && w.endsWith('s') && !w.endsWith('ss')) return w.slice(0, -1);
  if (w.length > 5 && w.endsWith('ed')) return w.slice(0, -2);
  return w;
}

/**
 * Upstream names for what kvkit calls otherwise (canonical forms: lower case,
 * no separators), so an identifier in a pasted message meets ours.
 */
const ALIASES: Record<string, string> = {
  posids: 'positions',
  positionids: 'positions',
  slotmapping: 'slots',
  outcacheloc: 'slots',
  cacheloc: 'slots',
  cachelocs: 'slots',
  kvcacheloc: 'slots',
  kcache: 'kpool',
  keycache: 'kpool',
  kbuffer: 'kpool',
  pagedkcache: 'kpool',
  vcache: 'vpool',
  valuecache: 'vpool',
  vbuffer: 'vpool',
  pagedvcache: 'vpool',
  numheads: 'numqoheads',
  numattentionheads: 'numqoheads',
  numkeyvalueheads: 'numkvheads',
  headsize: 'headdim',
  rotdim: 'rotarydim',
  ropetheta: 'ropebase',
  rmsnormeps: 'eps',
  originalmaxpositionembeddings: 'originalmaxpositions',
  query: 'q',
  key: 'k',
};

const canon = (name: string): string => {
  const c = name.replace(/_/g, '').toLowerCase();
  return ALIASES[c] ?? c;
};

const DTYPE_NAME = /\b(?:torch\.)?(?:b?float(?:8\w*|16|32|64)|half|double|u?int(?:8|16|32|64)|[fi](?:16|32|64)|bf16|fp(?:8|16|32)\w*)\b/gi;
const IDENTIFIER = /[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+/g;
const ACCESSOR = /([A-Za-z_][A-Za-z0-9_]*)(?:\(\))?\s*\.\s*(shape|size|numel|ndim|dim|dtype|stride)\b\s*(?:[[(]\s*(-?\d*)\s*[\])])?/g;

/** `name.shape[0]`, `name.size(0)`, `name.numel()` are one thing: how many rows there are. */
function accessorKind(what: string, index: string | undefined): string {
  if (what === 'numel') return 'count';
  if (what === 'ndim' || what === 'dim') return 'rank';
  if (what === 'dtype' || what === 'stride') return what;
  if (index === undefined || index === '') return 'shape';
  if (index === '0') return 'count';
  if (index === '-1') return 'last';
  return `dim${index}`;
}

/**
 * The terms of a text: words, word pairs, `id:` identifiers and `@` accessors.
 * Plain words count as identifiers when they are an argument name of some
 * entry (`positions`, `slots`, `q`), or in code spans.
 */
function termsOf(text: string, argNames: ReadonlySet<string>): Set<string> {
  // Placeholders, and the exception class a traceback names, say nothing about which mistake it is.
  const plain = text.replace(/\{\w*=?\}/g, ' ').replace(/\b[A-Z]\w*(?:Error|Exception)\b:?/g, ' ');
  // A dtype's name (`torch.float16`, `bf16`, `int64`), or PyTorch's "scalar type", says the mistake is about dtypes.
  const ws = words(plain.replace(DTYPE_NAME, ' dtype ').replace(/\bscalar type\b/gi, ' dtype '));
  const terms = new Set<string>([...ws, ...ws.slice(1).map((w, i) => `${ws[i]}_${w}`)]);
  for (const m of plain.matchAll(IDENTIFIER)) terms.add(`id:${canon(m[0])}`);
  for (const m of plain.matchAll(/`([A-Za-z_][A-Za-z0-9_]*)`/g)) terms.add(`id:${canon(m[1]!)}`);
  for (const m of plain.matchAll(/[A-Za-z][A-Za-z0-9]*/g)) {
    const c = canon(m[0]);
    if (argNames.has(c)) terms.add(`id:${c}`);
  }
  return accessorTerms(plain, terms);
}

/** Accessor terms of an expression: `positions.numel()` gives `id:positions`, `@count`, `positions@count`. */
function accessorTerms(text: string, into: Set<string>): Set<string> {
  for (const m of text.matchAll(ACCESSOR)) {
    const kind = accessorKind(m[2]!, m[3]);
    into.add(`id:${canon(m[1]!)}`);
    into.add(`@${kind}`);
    into.add(`${canon(m[1]!)}@${kind}`);
  }
  return into;
}

/**
 * The checks the upstream sources name (`positions.numel() != ctx_hidden.shape[0]`),
 * their accessors only: a pasted condition meets the check it states, while
 * the paths and names around it say nothing.
 */
function checks(entry: CatalogEntry): { terms: Set<string>; weight: number }[] {
  const terms = new Set<string>();
  for (const u of entry.upstream) if (u.source) accessorTerms(u.source, terms);
  return terms.size ? [{ terms, weight: 1 }] : [];
}

const isIdentifierTerm = (t: string) => t.startsWith('id:') || t.includes('@');

type Vec = Map<string, number>;

interface Indexed {
  entry: CatalogEntry;
  fields: { vec: Vec; weight: number }[];
  /** Every term of every field: what the entry covers. */
  all: Vec;
  template: Template;
  /** The upstream wordings as patterns, so a pasted one is recognised whatever fills its placeholders. */
  upstream: UpstreamTemplate[];
}

interface UpstreamTemplate {
  pattern: RegExp;
  specificity: number;
}

interface Template {
  /** Sticky: tried at each place a message can start. */
  pattern: RegExp;
  /** Placeholder name of each capture group, in order. */
  names: string[];
  /** How specific the literal text is, in [0, 1]: its term weight against the catalog's typical template. */
  specificity: number;
}

/** The message template as a pattern: literal text exact, each placeholder any text. */
function compileTemplate(message: string): { pattern: RegExp; names: string[]; literal: string } {
  const names: string[] = [];
  const literal: string[] = [];
  const source = message
    .split(/(\{\w+\})/)
    .map((part) => {
      const m = /^\{(\w+)\}$/.exec(part);
      if (!m) {
        literal.push(part);
        return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      }
      names.push(m[1]!);
      // Names of arguments and ops are identifiers; other values (shapes, lists) may hold anything.
      return ['arg', 'other', 'op'].includes(m[1]!) ? '([\\w.]+)' : '(.{1,300}?)';
    })
    .join('');
  return { pattern: new RegExp(source, 'y'), names, literal: literal.join(' ') };
}

/** An upstream wording as a pattern: its literal text exact (any run of spaces for a space), each placeholder any text. */
function compileUpstream(message: string): { pattern: RegExp; literal: string } {
  const literal: string[] = [];
  const source = message
    .split(/(\{\w*=?\})/)
    .map((part) => {
      // Bounded, so a long pasted traceback cannot make the search quadratic.
      if (/^\{\w*=?\}$/.test(part)) return '.{1,300}?';
      literal.push(part);
      return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\s+/g, '\\s+');
    })
    .join('');
  return { pattern: new RegExp(source), literal: literal.join(' ') };
}

/** An upstream wording found in the text counts as much as its literal text is specific; a short one, not at all. */
function upstreamScore(t: UpstreamTemplate, text: string): number {
  if (t.specificity < 0.5 || !t.pattern.test(text)) return 0;
  return 0.55 + 0.35 * t.specificity;
}

/** Where a message can start: the text's start, a line's, or after `op: ` / `[KV012] ` / `Error: `. */
function startsOf(text: string): number[] {
  const starts = new Set([0]);
  for (const m of text.matchAll(/(?:^|\n|: |\] )/g)) starts.add(m.index + m[0].length);
  return [...starts];
}

/**
 * 0 unless the text is this template filled in. Then more for a literal text
 * that is specific, for naming an argument this code checks and an op that
 * raises it; a near-empty template (`{arg}: {problem}`) counts only with its argument.
 */
function templateScore(t: Template, entry: CatalogEntry, text: string): number {
  const argAt = t.names.indexOf('arg');
  let best = 0;
  for (const start of startsOf(text)) {
    t.pattern.lastIndex = start;
    const m = t.pattern.exec(text);
    if (!m) continue;
    // A check every tensor argument gets (no args listed) accepts any name; others want one of theirs.
    const argMatches = argAt >= 0 && entry.args.includes(m[argAt + 1]!);
    if (t.specificity < 0.25 && !argMatches && entry.args.length > 0) continue;
    const opNamed = entry.raisedBy.some((op) => text.includes(`${op}:`));
    best = Math.max(best, 0.55 + 0.3 * t.specificity + (argMatches ? 0.1 : 0) + (opNamed ? 0.05 : 0));
  }
  return best;
}

interface Index {
  weights: Map<string, number>;
  argNames: Set<string>;
  entries: Indexed[];
}

let cached: Index | undefined;

function index(): Index {
  if (cached) return cached;
  const argNames = new Set(catalog.flatMap((e) => e.args.map(canon)));
  const docs = catalog.map((entry) => ({
    entry,
    fields: [
      { text: `${entry.title} ${entry.message} ${entry.args.map((a) => `\`${a}\``).join(' ')}`, weight: 1 },
      ...entry.upstream.map((u) => ({ text: u.message, weight: 1 })),
      { text: `${entry.title} ${entry.meaning} ${entry.whenItHappens}`, weight: PROSE_WEIGHT },
    ]
      .map((f) => ({ terms: termsOf(f.text, argNames), weight: f.weight }))
      .concat(checks(entry)),
  }));
  const df = new Map<string, number>();
  for (const d of docs) for (const t of new Set(d.fields.flatMap((f) => [...f.terms]))) df.set(t, (df.get(t) ?? 0) + 1);
  const weights = new Map([...df].map(([t, n]) => [t, Math.log(1 + docs.length / n) * (isIdentifierTerm(t) ? IDENTIFIER_WEIGHT : 1)]));

  const templates = catalog.map((e) => compileTemplate(e.message));
  const mass = (literal: string) => [...termsOf(literal, argNames)].reduce((sum, term) => sum + (weights.get(term) ?? 0), 0);
  const literalMass = templates.map((t) => mass(t.literal));
  // The typical template's literal weight (upper quartile) counts as fully specific.
  const reference = [...literalMass].sort((a, b) => a - b)[Math.floor(literalMass.length * 0.75)] || 1;
  const specificity = (m: number) => Math.min(1, m / reference);

  cached = {
    weights,
    argNames,
    entries: docs.map((d, i) => ({
      entry: d.entry,
      fields: d.fields.map((f) => ({ vec: weigh(weights, f.terms), weight: f.weight })),
      all: weigh(weights, new Set(d.fields.flatMap((f) => [...f.terms]))),
      template: { pattern: templates[i]!.pattern, names: templates[i]!.names, specificity: specificity(literalMass[i]!) },
      upstream: d.entry.upstream.map((u) => {
        const t = compileUpstream(u.message);
        return { pattern: t.pattern, specificity: specificity(mass(t.literal)) };
      }),
    })),
  };
  return cached;
}

/** The terms the catalog knows, each with its weight; others carry no evidence either way. */
function weigh(weights: Map<string, number>, terms: Set<string>): Vec {
  const v: Vec = new Map();
  for (const t of terms) {
    const w = weights.get(t);
    if (w !== undefined) v.set(t, w);
  }
  return v;
}

/** The share of the query's weight that the entry's terms cover. */
function coverage(query: Vec, all: Vec): number {
  let covered = 0;
  let total = 0;
  for (const [t, w] of query) {
    total += w * w;
    if (all.has(t)) covered += w * w;
  }
  return total === 0 ? 0 : covered / total;
}

function cosine(a: Vec, b: Vec): number {
  let dot = 0;
  for (const [t, w] of a) dot += w * (b.get(t) ?? 0);
  const norm = (v: Vec) => Math.sqrt([...v.values()].reduce((s, w) => s + w * w, 0));
  const n = norm(a) * norm(b);
  return n === 0 ? 0 : dot / n;
}
