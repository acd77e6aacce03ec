/**
 * Minifies the WGSL that the kernel builders (src/shaders, src/generated)
 * hold in template and string literals, at build time: `//` comments go, and
 * every run of blanks goes or shrinks to one character. Tokens never change:
 * two words, or two operator characters that could read as one (`- -`,
 * `/ /`, `> >`), keep a blank between them, and so does each end of a
 * literal piece (a `${...}` or another string may adjoin it). A piece with a
 * `//` its line does not end, or with either end of a block comment, is left
 * as it is written, and so is the literal it belongs to. The sources under
 * src stay as they are.
 */
import ts from 'typescript';

/** Word characters of WGSL (identifiers, numbers with their suffixes, member access). */
const WORD = /[A-Za-z0-9_.]/;
/** Characters of WGSL's operators of two or more characters (`&&`, `->`, `>>=`, `//`, ...): two of them keep a blank between them. */
const OPERATOR = /[&|+\-*/%^<>=!~]/;

/** Whether the blank between characters `a` and `b` keeps them apart as tokens. */
function separates(a: string, b: string): boolean {
  return (WORD.test(a) && WORD.test(b)) || (OPERATOR.test(a) && OPERATOR.test(b));
}

/**
 * The minified text of one literal piece of WGSL; undefined where it is left
 * as written. Up to the piece's first newline it may continue a comment of
 * the text before it, so that newline stays.
 */
export function minifyWgslPiece(text: string): string | undefined {
  if (/\/\/[^\n]*$/.test(text) || text.includes('/*') || text.includes('*/')) return undefined;
  // WGSL has no string literals, so `//` starts a comment; the newline ending it stays until the blanks shrink.
  const collapsed = text.replace(/\/\/[^\n]*/g, '').replace(/[ \t\r\n]+/g, (run) => (run.includes('\n') ? '\n' : ' '));
  const firstNewline = collapsed.indexOf('\n');
  let out = '';
  for (let i = 0; i < collapsed.length; i++) {
    const c = collapsed[i]!;
    const blank = c === ' ' || c === '\n';
    if (blank && i > 0 && i < collapsed.length - 1 && i !== firstNewline && !separates(collapsed[i - 1]!, collapsed[i + 1]!)) continue;
    out += c;
  }
  return out;
}

/** The text of a template piece as written, between its delimiters. */
function rawOf(node: ts.TemplateLiteralLikeNode, source: ts.SourceFile): string {
  const text = node.getText(source);
  return text.slice(1, text.length - (ts.isTemplateHead(node) || ts.isTemplateMiddle(node) ? 2 : 1));
}

/**
 * A transformer for program.emit: in the files `applies` accepts, every
 * template literal that spans lines, and every string literal holding a
 * newline, is minified as WGSL. A template piece with an escape keeps the
 * whole template as written (its raw and cooked text differ).
 */
export function wgslMinifier(applies: (fileName: string) => boolean): ts.TransformerFactory<ts.SourceFile> {
  return (context) => (source) => {
    if (!applies(source.fileName)) return source;
    const f = context.factory;
    const visit = (node: ts.Node): ts.Node => {
      if (ts.isNoSubstitutionTemplateLiteral(node) && node.getText(source).includes('\n')) {
        const raw = rawOf(node, source);
        const text = raw.includes('\\') ? undefined : minifyWgslPiece(raw);
        return text === undefined ? node : ts.setTextRange(f.createNoSubstitutionTemplateLiteral(text, text), node);
      }
      if (ts.isTemplateExpression(node) && node.getText(source).includes('\n')) {
        const raws = [node.head, ...node.templateSpans.map((s) => s.literal)].map((p) => rawOf(p, source));
        const texts = raws.map((raw) => (raw.includes('\\') ? undefined : minifyWgslPiece(raw)));
        if (texts.some((t) => t === undefined)) return ts.visitEachChild(node, visit, context);
        const last = texts.length - 1;
        const spans = node.templateSpans.map((s, i) => {
          const text = texts[i + 1]!;
          const literal = i + 1 === last ? f.createTemplateTail(text, text) : f.createTemplateMiddle(text, text);
          return f.createTemplateSpan(ts.visitNode(s.expression, visit) as ts.Expression, literal);
        });
        return ts.setTextRange(f.createTemplateExpression(f.createTemplateHead(texts[0]!, texts[0]!), spans), node);
      }
      if (ts.isStringLiteral(node) && node.text.includes('\n')) {
        const text = minifyWgslPiece(node.text);
        return text === undefined ? node : ts.setTextRange(f.createStringLiteral(text), node);
      }
      return ts.visitEachChild(node, visit, context);
    };
    return ts.visitNode(source, visit) as ts.SourceFile;
  };
}

/** The sources whose WGSL is minified: the kernel builders and their generated interfaces. */
export const WGSL_SOURCES = /[\\/]src[\\/](shaders|generated)[\\/][^\\/]+\.ts$/;

/**
 * A Vite plugin minifying the WGSL of the modules under src/shaders and
 * src/generated as the build does, so the tests run the kernels as they ship.
 */
export function wgslMinifyPlugin(): { name: string; enforce: 'pre'; transform(code: string, id: string): { code: string; map: string | undefined } | null } {
  return {
    name: 'kvkit-wgsl-minify',
    enforce: 'pre',
    transform(code, id) {
      const file = id.split('?')[0]!;
      if (!WGSL_SOURCES.test(file)) return null;
      const out = ts.transpileModule(code, {
        fileName: file,
        compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, verbatimModuleSyntax: true, sourceMap: true },
        transformers: { before: [wgslMinifier(() => true)] },
      });
      return { code: out.outputText.replace(/\n\/\/# sourceMappingURL=\S*\s*$/, '\n'), map: out.sourceMapText };
    },
  };
}
