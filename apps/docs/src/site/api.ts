import { join, relative, sep } from 'node:path';
import type { OpDecl } from '@kvkit/contracts/dsl';
import { Node, Project, TypeFormatFlags } from 'ts-morph';
import type { ClassDeclaration, ExportedDeclarations, InterfaceDeclaration, ParameterDeclaration, SourceFile, Symbol as TsSymbol, TypeElementTypes } from 'ts-morph';
import { readableSignature } from './ops.js';
import { type PackageInfo, publicPackages } from './packages.js';
import { repoRoot } from './paths.js';
import { apiPath } from './routes.js';

/**
 * The API reference, read at build time from each published package's source with ts-morph: every export of
 * every entry point a user imports, its declaration, its doc comment and, for interfaces and classes, each member.
 * The ops of `Backend` and `KvMaterializer` are shown as the op pages show them (the readable signature of their
 * contract), since their generated declarations carry the compile-time checks.
 */

export type ApiKind = 'function' | 'class' | 'interface' | 'type' | 'const';

export interface ApiMember {
  name: string;
  /** Anchor on the page. */
  id: string;
  /** The declaration, as TypeScript prints it (doc comments left out); one per overload. */
  signatures: string[];
  doc: string;
  /** The op this member calls, for a link to its page; its signature is then the contract's readable one. */
  op?: string;
}

export interface ApiItem {
  name: string;
  id: string;
  kind: ApiKind;
  /** One per overload; for an interface or class, its heading line (`interface WebGpuBackend extends Backend`). */
  signatures: string[];
  doc: string;
  /** `@deprecated`, `@example`, ...: any JSDoc tags, in order. */
  tags: { tag: string; text: string }[];
  members: ApiMember[];
  /** Bases it extends that no entry exports by name (Backend's `BackendOps`): their members are listed among its own. */
  inlined: string[];
  /** Bases it extends that an API page documents (WebGpuBackend's `Backend`): linked, their members left to their own item. */
  bases: string[];
  /** The package entry this name is re-exported from, where it is another package's (`@kvkit/contracts`). */
  from?: string;
  /** The declaration in the repository; absent for one read from another package's built declarations. */
  source?: { file: string; line: number };
}

export interface ApiGroup {
  title: string;
  note?: string;
  items: ApiItem[];
}

export interface ApiEntry {
  /** `@kvkit/kernels-wgsl/profiling` */
  specifier: string;
  /** Anchor prefix: '' for the package's main entry, `profiling-` for `./profiling`. */
  prefix: string;
  /** The entry file's header comment, if it has one. */
  intro: string;
  /** Repository path of the entry's source. */
  file: string;
  groups: ApiGroup[];
}

export interface CliCommand {
  usage: string;
  what: string;
}

export interface ApiPage {
  pkg: PackageInfo;
  /** The page's lead: the main entry's header comment, else the package description. */
  intro: string;
  entries: ApiEntry[];
  /** Entries of the package left off this page, each with its header comment: they are for backend authors and generators. */
  otherEntries: { specifier: string; intro: string }[];
  /** The package's command-line tool: `kvkit explain <code>`, ... from the usage text of its `bin` source. */
  cli: { name: string; file: string; commands: CliCommand[] } | undefined;
}

/**
 * Entries whose users write backends or generators, not applications: listed on their package's page with their
 * header comment, their names not documented one by one (their own packages' READMEs and the kernels page do).
 */
const AUTHOR_ENTRIES = new Set(['@kvkit/contracts/backend', '@kvkit/contracts/dsl', '@kvkit/contracts/kernels']);

const KIND_GROUPS: { kind: ApiKind; title: string }[] = [
  { kind: 'function', title: 'Functions' },
  { kind: 'class', title: 'Classes' },
  { kind: 'interface', title: 'Interfaces' },
  { kind: 'type', title: 'Types' },
  { kind: 'const', title: 'Constants' },
];

const TYPE_FLAGS = TypeFormatFlags.UseAliasDefinedOutsideCurrentScope | TypeFormatFlags.NoTruncation;

let cached: ApiPage[] | undefined;

/** Every API page, built once per process (getStaticPaths and each page ask for it). */
export function apiPages(ops: readonly OpDecl[]): ApiPage[] {
  cached ??= buildPages(ops);
  return cached;
}

function buildPages(ops: readonly OpDecl[]): ApiPage[] {
  const project = new Project({
    tsConfigFilePath: join(repoRoot, 'tsconfig.base.json'),
    skipAddingFilesFromTsConfig: true,
    // The WebGPU types (GPUBuffer, GPUDevice) are the DOM lib's, as kernels-wgsl's README tells users to set it up.
    compilerOptions: { lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'], noEmit: true },
  });
  const packages = publicPackages();
  const files = new Map<string, SourceFile>();
  for (const pkg of packages) for (const e of pkg.entries) files.set(e.specifier, project.addSourceFileAtPath(join(repoRoot, e.source)));
  const documented = new Set(packages.flatMap((p) => p.entries.filter((e) => !AUTHOR_ENTRIES.has(e.specifier)).map((e) => e.specifier)));
  // Every name an API page documents: an `extends` naming one links to it, one naming anything else is shown inline.
  const exported = new Set([...documented].flatMap((s) => [...files.get(s)!.getExportedDeclarations().keys()]));

  return packages.map((pkg) => {
    const entries = pkg.entries
      .filter((e) => documented.has(e.specifier))
      .map((e) => {
        const file = files.get(e.specifier)!;
        const prefix = e.subpath === '.' ? '' : `${e.subpath.replace(/^\.\//, '').replace(/\//g, '-')}-`;
        const siblings = new Map(pkg.entries.filter((o) => o !== e).map((o) => [files.get(o.specifier)!.getFilePath(), o.specifier]));
        return { specifier: e.specifier, prefix, intro: headerComment(file), file: e.source, groups: groupsOf(file, prefix, siblings, exported, ops) };
      });
    const otherEntries = pkg.entries.filter((e) => !documented.has(e.specifier)).map((e) => ({ specifier: e.specifier, intro: headerComment(files.get(e.specifier)!) }));
    return { pkg, intro: entries[0]?.intro || pkg.description, entries, otherEntries, cli: cliOf(project, pkg) };
  });
}

/**
 * An entry's exports, grouped by kind in the order the entry file lists them; names it re-exports from a sibling
 * entry of the same package (the root of @kvkit/contracts re-exports its `backend` and `dsl` names) come last,
 * grouped by that entry.
 */
function groupsOf(file: SourceFile, prefix: string, siblings: Map<string, string>, exported: Set<string>, ops: readonly OpDecl[]): ApiGroup[] {
  const origin = exportOrigins(file);
  const own: ApiItem[] = [];
  const bySibling = new Map<string, ApiItem[]>();
  for (const [name, decls] of file.getExportedDeclarations()) {
    const from = origin.get(name);
    const item = itemOf(name, decls, prefix, exported, ops, from && !from.startsWith('.') ? from : undefined);
    if (!item) continue;
    const sibling = from?.startsWith('.') ? siblingOf(file, from, siblings) : undefined;
    if (sibling) bySibling.set(sibling, [...(bySibling.get(sibling) ?? []), item]);
    else own.push(item);
  }
  const groups: ApiGroup[] = KIND_GROUPS.map((g) => ({ title: g.title, items: own.filter((i) => i.kind === g.kind) })).filter((g) => g.items.length > 0);
  for (const [specifier, items] of bySibling) {
    groups.push({
      title: `Also exported by ${specifier}`,
      note: `These names are ${specifier}'s; this entry re-exports them (for backend authors and generators: new code imports them from ${specifier}).`,
      items,
    });
  }
  return groups;
}

/** Exported name -> the module specifier of the `export ... from` that brings it in (absent for a local declaration). */
function exportOrigins(file: SourceFile): Map<string, string> {
  const origins = new Map<string, string>();
  for (const decl of file.getExportDeclarations()) {
    const spec = decl.getModuleSpecifierValue();
    if (spec === undefined) continue;
    const named = decl.getNamedExports();
    const names = named.length > 0 ? named.map((n) => n.getAliasNode()?.getText() ?? n.getName()) : [...(decl.getModuleSpecifierSourceFile()?.getExportedDeclarations().keys() ?? [])];
    for (const n of names) origins.set(n, spec);
  }
  return origins;
}

function siblingOf(file: SourceFile, spec: string, siblings: Map<string, string>): string | undefined {
  const target = file.getExportDeclarations().find((d) => d.getModuleSpecifierValue() === spec)?.getModuleSpecifierSourceFile();
  return target ? siblings.get(target.getFilePath()) : undefined;
}

function itemOf(name: string, decls: ExportedDeclarations[], prefix: string, exported: Set<string>, ops: readonly OpDecl[], from: string | undefined): ApiItem | undefined {
  const first = decls[0];
  if (!first) return undefined;
  const base = { name, id: `${prefix}${name}`, from, source: sourceOf(first), tags: tagsOf(first), inlined: [] as string[], bases: [] as string[] };
  if (Node.isFunctionDeclaration(first)) {
    const fns = decls.filter(Node.isFunctionDeclaration);
    // Overloads: the declared signatures, not the implementation's.
    const shown = [...new Set(fns.flatMap((f) => (f.isOverload() ? [f] : f.getOverloads().length > 0 ? f.getOverloads() : [f])))];
    return { ...base, kind: 'function', signatures: shown.map((f) => `function ${name}${typeParams(f)}(${params(f.getParameters())}): ${returnType(f)}`), doc: docOf(...shown, ...fns), members: [] };
  }
  if (Node.isClassDeclaration(first)) {
    return { ...base, kind: 'class', signatures: [heading('class', name, first)], doc: docOf(first), members: classMembers(first, base.id) };
  }
  if (Node.isInterfaceDeclaration(first)) {
    return { ...base, kind: 'interface', signatures: [heading('interface', name, first)], doc: docOf(first), ...interfaceMembers(first, base.id, exported, ops) };
  }
  if (Node.isTypeAliasDeclaration(first)) {
    return { ...base, kind: 'type', signatures: [`type ${name}${typeParams(first)} = ${clean(first.getTypeNodeOrThrow().getText())}`], doc: docOf(first), members: [] };
  }
  if (Node.isVariableDeclaration(first)) {
    const type = first.getTypeNode()?.getText() ?? first.getType().getText(first, TYPE_FLAGS);
    return { ...base, kind: 'const', signatures: [`const ${name}: ${clean(type)}`], doc: docOf(first), members: [] };
  }
  return undefined;
}

function heading(keyword: 'class' | 'interface', name: string, decl: ClassDeclaration | InterfaceDeclaration): string {
  const clauses = decl.getHeritageClauses().map((h) => clean(h.getText()));
  return [`${keyword} ${name}${typeParams(decl)}`, ...clauses].join(' ');
}

function interfaceMembers(decl: InterfaceDeclaration, owner: string, exported: Set<string>, ops: readonly OpDecl[]): { members: ApiMember[]; inlined: string[]; bases: string[] } {
  const inlined: string[] = [];
  const bases: string[] = [];
  const byName = new Map<string, ApiMember>();
  const add = (name: string, signature: string, doc: string, op?: OpDecl) => {
    const known = byName.get(name);
    if (known) {
      known.signatures.push(signature);
      known.doc ||= doc;
    } else byName.set(name, { name, id: `${owner}-${name}`, signatures: [signature], doc, ...(op ? { op: op.name } : {}) });
  };
  for (const m of decl.getMembers()) {
    const name = memberName(m);
    // A stateful op's method (KvMaterializer.materialize) is declared with its generated signature.
    const op = ops.find((o) => o.name === `${decl.getName()}.${name}`);
    add(name, op ? readableSignature(op, ops) : clean(m.getText()), op?.summary ?? docOf(m), op);
  }
  // A base the API pages do not document (Backend's BackendOps: the generated ops) is shown here, member by member.
  for (const h of decl.getHeritageClauses()) {
    for (const t of h.getTypeNodes()) {
      const base = t.getExpression().getText();
      if (exported.has(base)) {
        bases.push(base);
        continue;
      }
      inlined.push(base);
      for (const prop of t.getType().getProperties()) {
        if (byName.has(prop.getName())) continue;
        // The generated `wireOps` returns its ops as `{ fusedNormRopeStacked, ... }`: those members are the contracts' ops.
        const wired = prop.getDeclarations().some((d) => Node.isShorthandPropertyAssignment(d));
        const op = wired ? ops.find((o) => o.name === prop.getName()) : undefined;
        add(prop.getName(), op ? readableSignature(op, ops) : `${prop.getName()}: ${prop.getTypeAtLocation(decl).getText(decl, TYPE_FLAGS)}`, op?.summary ?? symbolDoc(prop), op);
      }
    }
  }
  return { members: [...byName.values()], inlined, bases };
}

function memberName(m: TypeElementTypes): string {
  if (Node.isCallSignatureDeclaration(m)) return '(call)';
  if (Node.isConstructSignatureDeclaration(m)) return 'new';
  if (Node.isIndexSignatureDeclaration(m)) return `[${m.getKeyName()}]`;
  return m.getName();
}

function classMembers(decl: ClassDeclaration, owner: string): ApiMember[] {
  const out: ApiMember[] = [];
  const isPublic = (m: Node) => !(Node.isModifierable(m) && (m.hasModifier('private') || m.hasModifier('protected'))) && !(Node.hasName(m) && m.getName().startsWith('#'));
  const ctors = decl.getConstructors().flatMap((c) => (c.getOverloads().length > 0 ? c.getOverloads() : [c]));
  if (ctors.length > 0) out.push({ name: 'constructor', id: `${owner}-constructor`, signatures: ctors.map((c) => `constructor(${params(c.getParameters())})`), doc: docOf(...ctors) });
  for (const p of decl.getProperties().filter(isPublic)) {
    const mods = ['static', 'readonly'].filter((m) => p.hasModifier(m as 'static' | 'readonly'));
    const type = p.getTypeNode()?.getText() ?? p.getType().getText(p, TYPE_FLAGS);
    out.push({ name: p.getName(), id: `${owner}-${p.getName()}`, signatures: [`${[...mods, ''].join(' ')}${p.getName()}${p.hasQuestionToken() ? '?' : ''}: ${clean(type)}`], doc: docOf(p) });
  }
  for (const m of decl.getMethods().filter(isPublic)) {
    const shown = m.getOverloads().length > 0 ? m.getOverloads() : [m];
    out.push({ name: m.getName(), id: `${owner}-${m.getName()}`, signatures: shown.map((s) => `${s.isStatic() ? 'static ' : ''}${m.getName()}${typeParams(s)}(${params(s.getParameters())}): ${returnType(s)}`), doc: docOf(...shown) });
  }
  return out;
}

function typeParams(node: { getTypeParameters(): { getText(): string }[] }): string {
  const tps = node.getTypeParameters();
  return tps.length ? `<${tps.map((t) => t.getText()).join(', ')}>` : '';
}

function params(ps: ParameterDeclaration[]): string {
  return ps
    .map((p) => {
      const optional = p.hasQuestionToken() || p.hasInitializer();
      const type = p.getTypeNode()?.getText() ?? p.getType().getText(p, TYPE_FLAGS);
      return `${p.isRestParameter() ? '...' : ''}${p.getNameNode().getText()}${optional ? '?' : ''}: ${clean(type)}`;
    })
    .join(', ');
}

function returnType(f: { getReturnTypeNode(): Node | undefined; getReturnType(): { getText(n?: Node, f?: TypeFormatFlags): string } } & Node): string {
  return clean(f.getReturnTypeNode()?.getText() ?? f.getReturnType().getText(f, TYPE_FLAGS));
}

/** Declaration text without the doc comments inside it, and without a trailing `;`. */
function clean(text: string): string {
  return text
    .replace(/\/\*\*[\s\S]*?\*\/\s*/g, '')
    .replace(/\n\s*\n/g, '\n')
    .replace(/;\s*$/, '')
    .trim();
}

function jsDocHolder(node: Node): Node | undefined {
  return Node.isVariableDeclaration(node) ? node.getVariableStatement() : node;
}

/** The first doc comment among `nodes` (an overload set documents its first signature), as plain text with paragraphs. */
function docOf(...nodes: Node[]): string {
  for (const node of nodes) {
    const holder = jsDocHolder(node);
    const docs = holder && Node.isJSDocable(holder) ? holder.getJsDocs() : [];
    const text = docs.at(-1)?.getCommentText()?.trim();
    if (text) return paragraphs(text);
  }
  return '';
}

function tagsOf(node: Node): { tag: string; text: string }[] {
  const holder = jsDocHolder(node);
  const docs = holder && Node.isJSDocable(holder) ? holder.getJsDocs() : [];
  return (docs.at(-1)?.getTags() ?? []).map((t) => ({ tag: t.getTagName(), text: paragraphs(t.getCommentText()?.trim() ?? '') }));
}

function symbolDoc(symbol: TsSymbol): string {
  for (const d of symbol.getDeclarations()) {
    const doc = docOf(d);
    if (doc) return doc;
  }
  return '';
}

/** Doc text with its line breaks folded: one line per paragraph, paragraphs split by a blank line. */
const paragraphs = (text: string) =>
  text
    .split(/\n\s*\n/)
    .map((p) => p.replace(/\s*\n\s*/g, ' ').trim())
    .filter(Boolean)
    .join('\n\n');

function sourceOf(node: Node): ApiItem['source'] {
  const file = relative(repoRoot, node.getSourceFile().getFilePath()).split(sep).join('/');
  // A name re-exported from another package resolves into that package's built declarations, which the repository does not hold.
  if (file.startsWith('..') || file.includes('/dist/') || file.includes('node_modules/')) return undefined;
  return { file, line: jsDocHolder(node)?.getStartLineNumber() ?? node.getStartLineNumber() };
}

/** The header comment of an entry file: a doc comment before its first statement, where that statement is an import or export list. */
function headerComment(file: SourceFile): string {
  const first = file.getStatements()[0];
  if (!first || !(Node.isImportDeclaration(first) || Node.isExportDeclaration(first))) return '';
  const comment = first.getLeadingCommentRanges().find((c) => c.getText().startsWith('/**'));
  if (!comment) return '';
  const body = comment
    .getText()
    .replace(/^\/\*\*|\*\/$/g, '')
    .split('\n')
    .map((l) => l.replace(/^\s*\* ?/, ''))
    .join('\n');
  return paragraphs(body.trim());
}

/**
 * A package's command-line tool, from the usage text its `bin` source prints (`const USAGE = \`usage: ...\``):
 * one command a line, its description after two or more spaces.
 */
function cliOf(project: Project, pkg: PackageInfo): ApiPage['cli'] {
  const [name, built] = Object.entries(pkg.bin)[0] ?? [];
  if (!name || !built) return undefined;
  const file = `packages/${pkg.dir}/${built.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts')}`;
  const source = project.addSourceFileAtPath(join(repoRoot, file));
  const usage = source.getVariableDeclaration('USAGE')?.getInitializer();
  if (!usage || !(Node.isNoSubstitutionTemplateLiteral(usage) || Node.isStringLiteral(usage))) return { name, file, commands: [] };
  const commands = usage
    .getLiteralText()
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith(`${name} `))
    .map((l) => {
      const [usageText, ...what] = l.split(/\s{2,}/);
      return { usage: usageText!, what: what.join(' ') };
    });
  return { name, file, commands };
}

/** Where an item of any documented entry is shown, for `from` links: `api/contracts/#ContractError`. */
export function itemPath(pages: readonly ApiPage[], specifier: string, name: string): string | undefined {
  for (const page of pages) {
    const entry = page.entries.find((e) => e.specifier === specifier);
    const item = entry?.groups.flatMap((g) => g.items).find((i) => i.name === name);
    if (entry && item) return `${apiPath(page.pkg.dir)}#${item.id}`;
  }
  return undefined;
}

/** Where an exported name is documented, for an `extends` link: on the given page if it is there, else on any. */
export function findItemPath(pages: readonly ApiPage[], name: string, prefer: ApiPage): string | undefined {
  for (const page of [prefer, ...pages.filter((p) => p !== prefer)]) {
    for (const entry of page.entries) {
      const item = entry.groups.flatMap((g) => g.items).find((i) => i.name === name);
      if (item) return `${apiPath(page.pkg.dir)}#${item.id}`;
    }
  }
  return undefined;
}

/** Doc text as HTML: escaped, `code` spans marked up, one <p> per paragraph. */
export function docHtml(text: string): string {
  return text
    .split('\n\n')
    .map((p) => `<p>${inlineCode(p)}</p>`)
    .join('');
}

/** Escapes text for HTML and turns `backquoted` spans into <code>. */
export function inlineCode(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/`([^`]+)`/g, '<code>$1</code>');
}
