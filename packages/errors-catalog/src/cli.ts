#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { catalog, explain } from './catalog.js';
import { formatEntry } from './format-entry.js';
import { lookup } from './lookup.js';

const USAGE = `usage:
  kvkit explain <code>        the full entry for a code, e.g. kvkit explain KV012
  kvkit lookup "<message>"    the entries that best match a pasted error message
  kvkit list                  every code with its title`;

function main(argv: string[]): number {
  const [command, ...rest] = argv;
  const text = rest.join(' ').trim();
  switch (command) {
    case 'explain': {
      const entry = explain(text);
      if (!entry) {
        process.stderr.write(`kvkit: no error code '${text}'. Try: kvkit lookup "<the whole message>"\n`);
        return 1;
      }
      process.stdout.write(`${formatEntry(entry)}\n`);
      return 0;
    }
    case 'lookup': {
      const input = text || readStdin();
      const matches = lookup(input, 5);
      if (matches.length === 0) {
        process.stderr.write('kvkit: no entry matches that message; `kvkit list` shows every code\n');
        return 1;
      }
      for (const m of matches) process.stdout.write(`${m.entry.code}  ${m.score.toFixed(2)}  ${m.entry.title}\n`);
      process.stdout.write(`\nkvkit explain ${matches[0]!.entry.code}   for the full entry\n`);
      return 0;
    }
    case 'list':
      for (const e of catalog) process.stdout.write(`${e.code}  ${e.title}${e.retired ? ' (retired)' : ''}\n`);
      return 0;
    default:
      process.stderr.write(`${USAGE}\n`);
      return command === undefined || command === 'help' || command === '--help' ? 0 : 2;
  }
}

function readStdin(): string {
  if (process.stdin.isTTY) return '';
  try {
    return readFileSync(0, 'utf8');
  } catch {
    return '';
  }
}

// A reader that stops early (kvkit list | head -1) closes the pipe: it has read all it wanted, so that is no failure.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code !== 'EPIPE') throw e;
  process.exit();
});

process.exitCode = main(process.argv.slice(2));
