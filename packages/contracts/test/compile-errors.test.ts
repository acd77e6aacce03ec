import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The type test file holds every compile-time contract check behind an
 * `@ts-expect-error KVxxx` directive. Here the directives are removed and
 * the file compiled again: each must then fail on its own line, with tsc's
 * message naming that exact code, and no other line may fail.
 */
const file = fileURLToPath(new URL('./types/signatures.typetest.ts', import.meta.url));
const config = fileURLToPath(new URL('../tsconfig.json', import.meta.url));

function compileWithoutDirectives() {
  const source = readFileSync(file, 'utf8');
  const lines = source.split('\n');
  const expected = new Map<number, string>(); // 0-based line of the failing code -> code
  const prints = new Map<number, string[]>(); // 0-based line -> what its message must also name (`prints "a" | "b"`)
  lines.forEach((line, i) => {
    const m = /\/\/ @ts-expect-error (KV\d{3})(?: prints (.+))?/.exec(line);
    if (m) {
      expected.set(i + 1, m[1]!);
      if (m[2]) prints.set(i + 1, m[2].split('|').map((part) => part.trim()));
      lines[i] = line.replace('@ts-expect-error', 'expected:');
    }
  });
  const parsed = ts.getParsedCommandLineOfConfigFile(config, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })!;
  const host = ts.createCompilerHost(parsed.options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, ...rest) => (name === file ? ts.createSourceFile(name, lines.join('\n'), lang) : read(name, lang, ...rest));
  const program = ts.createProgram({ rootNames: [file], options: parsed.options, host });
  const diagnostics = ts.getPreEmitDiagnostics(program).filter((d) => d.file?.fileName === file);
  const found = diagnostics.map((d) => ({
    line: d.file!.getLineAndCharacterOfPosition(d.start!).line,
    text: ts.flattenDiagnosticMessageText(d.messageText, '\n'),
  }));
  return { expected, prints, found };
}

describe('compile-time contract errors', () => {
  const { expected, prints, found } = compileWithoutDirectives();

  it('covers every seed condition and the other shape codes', () => {
    const codes = new Set(expected.values());
    for (const code of ['KV004', 'KV005', 'KV006', 'KV007', 'KV009', 'KV010', 'KV011', 'KV012', 'KV013', 'KV014', 'KV015', 'KV016', 'KV020', 'KV022', 'KV023', 'KV024', 'KV025', 'KV026', 'KV030', 'KV031', 'KV032', 'KV033', 'KV034', 'KV035', 'KV036', 'KV037', 'KV072', 'KV073', 'KV074']) {
      expect(codes, code).toContain(code);
    }
  });

  it.each([...expected].map(([line, code]) => ({ line: line + 1, code })))('line $line fails with $code named in the message', ({ line, code }) => {
    const here = found.filter((d) => d.line === line - 1);
    expect(here.length, `no compile error on line ${line}`).toBeGreaterThan(0);
    expect(here.map((d) => d.text).join('\n')).toContain(code);
  });

  it.each([...prints].map(([line, parts]) => ({ line: line + 1, parts })))('line $line names $parts', ({ line, parts }) => {
    const text = found.filter((d) => d.line === line - 1).map((d) => d.text).join('\n');
    for (const part of parts) expect(text).toContain(part);
  });

  it('accepts every call without a directive', () => {
    const stray = found.filter((d) => !expected.has(d.line));
    expect(stray.map((d) => `line ${d.line + 1}: ${d.text}`)).toEqual([]);
  });
});
