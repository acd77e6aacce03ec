/**
 * The layout of a prose entry (entries/KV012.md):
 *
 *   # KV012
 *   ## Meaning            paragraphs
 *   ## When it happens    paragraphs
 *   ## Situations         a bullet list
 *   ## Example            a ```ts before``` block, then a ```ts after``` block
 *   ## Related            a bullet list of codes
 *   ## Upstream messages  (optional) a bullet list of other systems' wordings
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
  upstreamMessages: string[];
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
  const block = (tag: string) => new RegExp('```ts ' + tag + '\\n([\\s\\S]*?)```').exec(example)?.[1]?.trimEnd() ?? '';
  return {
    meaning: paragraphs(get('Meaning')),
    whenItHappens: paragraphs(get('When it happens')),
    situations: items(get('Situations')),
    example: { before: block('before'), after: block('after') },
    related: items(get('Related')).map((r) => r.replace(/[^A-Z0-9]/gi, '').toUpperCase()),
    upstreamMessages: items(get('Upstream messages')),
  };
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
