import { catalog } from './catalog.js';
import type { CatalogEntry } from './entry.js';

export interface LookupMatch {
  entry: CatalogEntry;
  /** Cosine similarity in [0, 1]; 1 for a code named in the text. */
  score: number;
}

/**
 * Ranks entries for any pasted message. A code named in the text wins.
 * Then our own messages are recognised by their template (the placeholders
 * matching anything), the argument and op they name breaking ties between
 * templates that read alike. Anything else, upstream wordings included, is
 * matched word by word: words are split at camelCase and snake_case so
 * `k_norm_weight` meets `kNormWeight`; numbers, shapes and punctuation are
 * dropped; unigrams and bigrams are weighted by how rare they are.
 */
export function lookup(text: string, limit = 10): LookupMatch[] {
  const named = [...text.matchAll(/\bKV(\d{3})\b/gi)].map((m) => `KV${m[1]}`);
  const exact = catalog.filter((e) => named.includes(e.code)).map((entry) => ({ entry, score: 1 }));
  const entries = index();
  const query = vector(terms(text));
  const ranked = entries
    .map(({ entry, fields, template }) => ({
      entry,
      score: Math.max(templateScore(template, entry, text), ...fields.map((f) => cosine(query, f.vec) * f.weight)),
    }))
    .filter((m) => m.score > 0.05 && !named.includes(m.entry.code))
    .sort((a, b) => b.score - a.score || a.entry.code.localeCompare(b.entry.code));
  return [...exact, ...ranked].slice(0, limit);
}

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

/** Plural and tense endings off, so `positions` meets `position`. */
function stem(w: string): string {
  if (w.length > 4 && w.endsWith('ies')) return `${w.slice(0, -3)}y`;
  if (w.length > 3 && w.endsWith('s') && !w.endsWith('ss')) return w.slice(0, -1);
  if (w.length > 5 && w.endsWith('ed')) return w.slice(0, -2);
  return w;
}

function terms(text: string): string[] {
  const ws = words(text);
  return [...ws, ...ws.slice(1).map((w, i) => `${ws[i]}_${w}`)];
}

type Vec = Map<string, number>;

interface Indexed {
  entry: CatalogEntry;
  fields: { vec: Vec; weight: number }[];
  template: Template;
}

interface Template {
  pattern: RegExp;
  /** Placeholder name of each capture group, in order. */
  names: string[];
}

/** The message template as a pattern: literal text exact, each placeholder any text. */
function compileTemplate(message: string): Template {
  const names: string[] = [];
  const source = message
    .split(/(\{\w+\})/)
    .map((part) => {
      const m = /^\{(\w+)\}$/.exec(part);
      if (!m) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      names.push(m[1]!);
      // Names of arguments and ops are identifiers; other values (shapes, lists) may hold anything.
      return ['arg', 'other', 'op'].includes(m[1]!) ? '([\\w.]+)' : '(.+?)';
    })
    .join('');
  return { pattern: new RegExp(source), names };
}

/** 0 unless the text is this template filled in; more when the op and argument it names are ones this code covers. */
function templateScore(t: Template, entry: CatalogEntry, text: string): number {
  const m = t.pattern.exec(text);
  if (!m) return 0;
  const arg = m[t.names.indexOf('arg') + 1];
  const opNamed = entry.raisedBy.some((op) => text.includes(`${op}:`));
  return 0.7 + (arg !== undefined && entry.args.includes(arg) ? 0.2 : 0) + (opNamed ? 0.05 : 0);
}

let cached: { idf: Map<string, number>; entries: Indexed[] } | undefined;

function index(): Indexed[] {
  if (cached) return cached.entries;
  const docs = catalog.map((entry) => ({
    entry,
    fields: [
      { text: `${entry.title} ${entry.message}`, weight: 1 },
      ...entry.upstreamMessages.map((text) => ({ text, weight: 1 })),
      { text: `${entry.title} ${entry.meaning} ${entry.whenItHappens}`, weight: 0.6 },
    ],
  }));
  const df = new Map<string, number>();
  for (const d of docs) for (const t of new Set(d.fields.flatMap((f) => terms(f.text)))) df.set(t, (df.get(t) ?? 0) + 1);
  const idf = new Map([...df].map(([t, n]) => [t, Math.log(1 + docs.length / n)]));
  cached = { idf, entries: [] };
  cached.entries = docs.map((d) => ({
    entry: d.entry,
    fields: d.fields.map((f) => ({ vec: vector(terms(f.text)), weight: f.weight })),
    template: compileTemplate(d.entry.message),
  }));
  return cached.entries;
}

function vector(ts: string[]): Vec {
  const idf = cached!.idf;
  const v: Vec = new Map();
  for (const t of ts) {
    const w = idf.get(t);
    if (w !== undefined) v.set(t, (v.get(t) ?? 0) + w);
  }
  return v;
}

function cosine(a: Vec, b: Vec): number {
  let dot = 0;
  for (const [t, w] of a) dot += w * (b.get(t) ?? 0);
  const norm = (v: Vec) => Math.sqrt([...v.values()].reduce((s, w) => s + w * w, 0));
  const n = norm(a) * norm(b);
  return n === 0 ? 0 : dot / n;
}
