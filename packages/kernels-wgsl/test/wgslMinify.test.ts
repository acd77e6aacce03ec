/**
 * The build minifies the kernels' WGSL (scripts/wgslMinify.ts, run by
 * scripts/build.ts and by this package's vitest config): comments and blanks
 * go, the tokens stay. Checked here on pieces written to trip it, and on every
 * literal the kernel builders hold, read with a lexer of WGSL's own.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { minifyWgslPiece, WGSL_SOURCES, wgslMinifier } from '../scripts/wgslMinify.js';
import { FP8_WGSL } from '../src/shaders/fp8.wgsl.js';
import { INDEX_RANGE_WGSL } from '../src/shaders/common.wgsl.js';

/** WGSL's tokens: words (identifiers and numbers, with `.`), its operators of two and three characters, and single characters. */
const TOKEN = /[A-Za-z0-9_.]+|>>=|<<=|&&|\|\||--|\+\+|->|<<|>>|<=|>=|==|!=|[-+*/%&|^]=|\/\/|\/\*|\*\/|\S/g;
const tokens = (wgsl: string) => wgsl.match(TOKEN) ?? [];
/** The text without its `//` comments, as a WGSL compiler reads it. */
const uncommented = (wgsl: string) => wgsl.replace(/\/\/[^\n]*/g, '');

describe('WGSL minified at build time', () => {
  it('drops comments and blanks, keeping a blank wherever two words or two operator characters meet', () => {
    const wgsl = `
// A comment on its own line.
fn f(a: u32, b: i32) -> u32 {   // and one after code
  let x = a - -b;
  let y = x >> 1u;
  let z = vec2<u32>(x, y) > vec2<u32>(1u);
  return select(0u, 1u, z.x) + (x / /* never here */ 2u);
}
`;
    expect(minifyWgslPiece(wgsl)).toBeUndefined(); // a block comment: left as written
    const plain = wgsl.replace(' /* never here */', '');
    const out = minifyWgslPiece(plain)!;
    expect(out).toBe('\nfn f(a:u32,b:i32)->u32{let x=a- -b;let y=x>>1u;let z=vec2<u32>(x,y)>vec2<u32>(1u);return select(0u,1u,z.x)+(x/2u);}\n');
    expect(tokens(out)).toEqual(tokens(uncommented(plain)));
  });

  it('keeps a blank at each end of a piece, where a substitution or another string adjoins it', () => {
    expect(minifyWgslPiece('  let v = ')).toBe(' let v= ');
    expect(minifyWgslPiece('\n  ')).toBe('\n');
    expect(minifyWgslPiece('u;\n  fn ')).toBe('u;\nfn ');
  });

  it('keeps the first newline of a piece (the text before may end in a comment), and leaves a piece whose comment runs past its end as written', () => {
    expect(minifyWgslPiece(' more words\n}\n  let a = 1u;\n}')).toBe(' more words\n}let a=1u;}');
    expect(minifyWgslPiece('let a = 1u; // about ')).toBeUndefined();
    expect(minifyWgslPiece('end of a comment */ let a = 1u;\n')).toBeUndefined();
  });

  it('keeps the tokens of every literal of the kernel builders, and the tests run the minified kernels', () => {
    const dirs = ['../src/shaders/', '../src/generated/'].map((d) => fileURLToPath(new URL(d, import.meta.url)));
    const files = dirs.flatMap((dir) => readdirSync(dir).map((f) => dir + f)).filter((f) => WGSL_SOURCES.test(f));
    expect(files.length).toBeGreaterThan(10);
    let changed = 0;
    for (const file of files) {
      const source = readFileSync(file, 'utf8');
      const compile = (minify: boolean) =>
        ts.transpileModule(source, {
          fileName: file,
          compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, verbatimModuleSyntax: true },
          transformers: minify ? { before: [wgslMinifier(() => true)] } : undefined,
        }).outputText;
      const [before, after] = [compile(false), compile(true)].map(literals);
      expect(after.length, file).toBe(before.length);
      before.forEach((text, i) => {
        expect(tokens(uncommented(after[i]!)), `${file}: ${JSON.stringify(text.slice(0, 60))}`).toEqual(tokens(uncommented(text)));
        if (after[i] !== text) changed += 1;
      });
    }
    expect(changed).toBeGreaterThan(50);
    // Imported here through the vitest config's plugin, as the build emits them.
    expect(FP8_WGSL).not.toContain('//');
    expect(FP8_WGSL).not.toMatch(/\n /);
    expect(INDEX_RANGE_WGSL).toBe('\nfn indexIsNegative(v:vec2<u32>)->bool{return(v.y&0x80000000u)!=0u;}fn indexBelow(v:vec2<u32>,below:u32)->bool{return v.y==0u&&v.x<below;}\n');
  });
});

/** The text of every string literal and template piece of a module, in order. */
function literals(js: string): string[] {
  const out: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) out.push(node.text);
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile('module.js', js, ts.ScriptTarget.ES2022, true));
  return out;
}
