/**
 * The layout of a prose entry (entries/KV012.md):
 *
 *   # KV012
 *   ## Meaning            paragraphs
 *   ## When it happens    paragraphs
 *   ## Situations         a bullet list
 *   ## Example            a ```ts before``` block, then a ```ts after``` block
 *   ## Related            a bullet list of codes
 *   ## Upstream messages  (optional) a bullet list of other systems' wordings,
 *                         each item the message (its `{placeholders}` for the
 *                         values the library fills in) and, on an indented
 *                         line below it, `Source: <library>, <repo> <path>, <function or check>`
 *
 * The solutions are not here: they are the `fixes` of the code's declaration
 * in packages/contracts, which `ContractError` carries too.
 */
export interface ParsedEntry {
  meaning: string;
  whenItHappens: string;
  situations: string[];
  example: { before: string; after: string };
  related: string[];
  /** Other systems' wordings of the same condition, each with where it was found. */
  upstream: UpstreamMessage[];
  /** The same wordings, the messages alone. */
  upstreamMessages: string[];
}

export interface UpstreamMessage {
  message: string;
  /** `<library>, <repo> <path>, <function or check>`; absent for the few wordings whose origin was not recorded. */
  source?: string;
}

export const SECTIONS = ['Meaning', 'When it happens', 'Situations', 'Example', 'Related'] as const;

export function parseEntry(md: string): ParsedEntry {
  const sections = new Map<string, string>();
  for (const part of md.split(/^## /m).slice(1)) {
    const nl = part.indexOf('\n');
    sections.set(part.slice(0, nl).trim(), part.slice(nl + 1).trim());
  }
  const get = (name: string) => sections.get(name) ?? '';
  const example = get('Example');
  const upstream = upstreamItems(get('Upstream messages'));
  const block = (tag: string) => new RegExp('```ts ' + tag + '\\n([\\s\\S]*?)```').exec(example)?.[1]?.trimEnd() ?? '';
  return {
    meaning: paragraphs(get('Meaning')),
    whenItHappens: paragraphs(get('When it happens')),
    situations: items(get('Situations')),
    example: { before: block('before'), after: block('after') },
    related: items(get('Related')).map((r) => r.replace(/[^A-Z0-9]/gi, '').toUpperCase()),
    upstream,
    upstreamMessages: upstream.map((u) => u.message),
  };
}

/** `- message` items, each with an optional `Source: ...` line under it. */
function upstreamItems(text: string): UpstreamMessage[] {
  return text
    .split(/^\s*[-*]\s+/m)
    .map((item) => {
      const lines = item.split('\n').map((l) => l.trim()).filter(Boolean);
      const at = lines.findIndex((l) => l.startsWith('Source:'));
      const message = (at < 0 ? lines : lines.slice(0, at)).join(' ');
      const source = at < 0 ? undefined : lines.slice(at).join(' ').replace(/^Source:\s*/, '');
      return source === undefined ? { message } : { message, source };
    })
    .filter((u) => u.message !== '');
}

function paragraphs(text: string): string {
  return text.split(/\n\s*\n/).map((p) => p.replace(/\s*\n\s*/g, ' ').trim()).filter(Boolean).join('\n\n');
}

/** List items (`-` or `1.`), each folded onto one line. */
function items(text: string): string[] {
  return text
    .split(/^\s*(?:[-*]|\d+\.)\s+/m)
    .map((s) => s.replace(/\s*\n\s*/g, ' ').trim())
    .filter(Boolean);
}
