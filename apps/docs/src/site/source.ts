import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { repoFileUrl, repoRoot } from './paths.js';

export interface SourceExcerpt {
  file: string;
  line: number;
  url: string;
  /** The lines around the declaration; `undefined` when the file is not in this checkout. */
  code: string | undefined;
  /** 1-based line of the declaration within `code`. */
  markLine: number;
}

/** The declaration a catalog entry points at, with `context` lines either side, read from the repository at build time. */
export function sourceExcerpt(source: { file: string; line: number }, context = 3): SourceExcerpt {
  const { file, line } = source;
  const url = repoFileUrl(file, line);
  let text: string;
  try {
    text = readFileSync(resolve(repoRoot, file), 'utf8');
  } catch {
    return { file, line, url, code: undefined, markLine: 0 };
  }
  const lines = text.split('\n');
  const from = Math.max(1, line - context);
  const to = Math.min(lines.length, line + context);
  return { file, line, url, code: lines.slice(from - 1, to).join('\n'), markLine: line - from + 1 };
}
