import { spawn } from 'node:child_process';
import { join } from 'node:path';
import ts from 'typescript';
import { docsRoot } from './site.js';

/**
 * The fenced code blocks of a Markdown page, for checking that a page's samples compile and run as printed.
 * A ```text block right after a line ending in `prints:` is the output of the sample before it.
 */
export interface Sample {
  lang: string;
  /** The fence's `title="..."`, else `sample-<n>`. */
  name: string;
  code: string;
  /** 1-based line of the page where the code starts. */
  line: number;
  /** What the page says the sample prints. */
  output?: string;
}

export function fencedBlocks(markdown: string): Sample[] {
  const lines = markdown.split('\n');
  const blocks: Sample[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,})(\S*)\s*(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const [, fence, lang, meta] = open;
    const end = lines.findIndex((l, j) => j > i && l.startsWith(fence!) && l.trim() === fence);
    if (end < 0) throw new Error(`unclosed code fence at line ${i + 1}`);
    const code = lines.slice(i + 1, end).join('\n');
    const title = /title="([^"]+)"/.exec(meta!)?.[1];
    const before = lines
      .slice(0, i)
      .reverse()
      .find((l) => l.trim() !== '');
    const previous = blocks.at(-1);
    if (lang === 'text' && previous && before?.trimEnd().endsWith('prints:')) previous.output = code;
    else blocks.push({ lang: lang!, name: title ?? `sample-${blocks.length + 1}`, code, line: i + 2 });
    i = end;
  }
  return blocks;
}

/**
 * What a user's project would set: ES modules with `nodenext` resolution, strict, the DOM lib for the WebGPU types
 * (kernels-wgsl's README), Node's types, and every declaration file checked (no skipLibCheck).
 */
export const SAMPLE_OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ['lib.es2023.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
  types: ['node'],
  strict: true,
  skipLibCheck: false,
  noEmit: true,
};

/** Where the samples are compiled from (never written there): inside this package, so `@kvkit/*` resolve as its dependencies and files are ES modules. */
const sampleDir = join(docsRoot, 'test', '.samples');

export interface SampleDiagnostic {
  sample: string;
  /** 1-based line within the sample. */
  line: number;
  text: string;
}

/** Type-checks each sample as its own module file; every error, by sample and line (declaration files' errors too). */
export function compileSamples(samples: readonly { name: string; code: string }[]): SampleDiagnostic[] {
  const files = new Map(samples.map((s, i) => [join(sampleDir, `${i}-${s.name.replace(/\.ts$/, '')}.ts`), s]));
  const host = ts.createCompilerHost(SAMPLE_OPTIONS, true);
  const { getSourceFile, fileExists, readFile } = host;
  host.getCurrentDirectory = () => docsRoot;
  host.fileExists = (f) => files.has(f) || fileExists.call(host, f);
  host.readFile = (f) => files.get(f)?.code ?? readFile.call(host, f);
  host.getSourceFile = (f, lang, ...rest) => {
    const sample = files.get(f);
    return sample ? ts.createSourceFile(f, sample.code, lang, true) : getSourceFile.call(host, f, lang, ...rest);
  };
  const program = ts.createProgram([...files.keys()], SAMPLE_OPTIONS, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const sample = d.file ? files.get(d.file.fileName) : undefined;
    const line = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : 0;
    const where = sample ? sample.name : (d.file?.fileName ?? '(options)');
    return { sample: where, line, text: ts.flattenDiagnosticMessageText(d.messageText, '\n') };
  });
}

/** Runs a sample as an ES module in Node, from this package (so its imports resolve as they compiled). */
export function runSample(code: string, timeoutMs = 60_000): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const js = ts.transpileModule(code, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: false } }).outputText;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '--eval', js], { cwd: docsRoot, stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}
