import { docsUrl } from '@kvkit/contracts';
import type { CatalogEntry } from './entry.js';

/** The entry as plain text for a terminal: what `kvkit explain` prints. */
export function formatEntry(e: CatalogEntry): string {
  const list = (items: readonly string[], numbered = false) => items.map((s, i) => `  ${numbered ? `${i + 1}.` : '-'} ${s}`).join('\n');
  const indent = (code: string) => code.replace(/^/gm, '    ');
  const url = docsUrl(e.code);
  return [
    `${e.code}: ${e.title}${e.retired ? ' (retired)' : ''}`,
    `raised by: ${e.raisedBy.join(', ')}`,
    '',
    `message:  ${e.message}`,
    '',
    e.meaning,
    '',
    'When it happens:',
    `  ${e.whenItHappens}`,
    '',
    'Common situations:',
    list(e.situations),
    '',
    'Solutions:',
    list(e.solutions, true),
    '',
    'Example (throws):',
    indent(e.example.before),
    '',
    'Fixed:',
    indent(e.example.after),
    '',
    ...(e.upstream.length === 0
      ? []
      : ['The same error in other systems:', ...e.upstream.map((u) => `  - ${u.message}${u.source ? `\n      (${u.source})` : ''}`), '']),
    `Related: ${e.related.join(', ') || 'none'}`,
    `Declared at: ${e.source.file}:${e.source.line}`,
    ...(url === undefined ? [] : [`Docs: ${url}`]),
  ].join('\n');
}
