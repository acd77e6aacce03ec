/**
 * The package's build: tsc's compile of tsconfig.build.json (the same
 * program, checks and outputs), the WGSL of src/shaders and src/generated
 * minified as it is emitted (scripts/wgslMinify.ts), so that a bundle carries
 * no shader comments or indentation.
 */
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { WGSL_SOURCES, wgslMinifier } from './wgslMinify.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const host: ts.FormatDiagnosticsHost = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => root, getNewLine: () => ts.sys.newLine };

function fail(diagnostics: readonly ts.Diagnostic[]): never {
  process.stderr.write(ts.formatDiagnosticsWithColorAndContext(diagnostics, host));
  process.exit(1);
}

// `--outDir <dir>` builds elsewhere (to compare builds); otherwise dist, as tsconfig.build.json has it.
const at = process.argv.indexOf('--outDir');
const overrides: ts.CompilerOptions = at >= 0 ? { outDir: process.argv[at + 1] } : {};
const config = ts.getParsedCommandLineOfConfigFile(`${root}tsconfig.build.json`, overrides, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => fail([d]) });
if (!config) process.exit(1);
if (config.errors.length > 0) fail(config.errors);
const program = ts.createProgram({ rootNames: config.fileNames, options: config.options, projectReferences: config.projectReferences });
const emitted = program.emit(undefined, undefined, undefined, false, { before: [wgslMinifier((file) => WGSL_SOURCES.test(file))] });
const diagnostics = [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics];
if (diagnostics.some((d) => d.category === ts.DiagnosticCategory.Error)) fail(diagnostics);
