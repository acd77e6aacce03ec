import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Arg, DTypeRule, OpDecl, Step, TensorArg } from '@kvkit/contracts/dsl';
import { repoRoot } from './paths.js';


const isArg = (s: Step): s is Arg => s.kind === 'tensor' || s.kind === 'int' || s.kind === 'number' || s.kind === 'choice' || s.kind === 'flag' || s.kind === 'callback' || s.kind === 'ints' || s.kind === 'tagged';

export interface DimRow {
  name: string;
  meaning: string;
  /** How a call fixes its value, in words; `undefined` where this call leaves it open. */
  boundBy: string | undefined;
}

/**
 * Where each dim of an op gets its value: a parameter that binds it, else the
 * first tensor axis (in check order) that names it alone, else the call this
 * op inherits from, else a call that inherits from this op.
 */
export function dimRows(op: OpDecl, ops: readonly OpDecl[]): DimRow[] {
  const parent = op.inherits ? ops.find((o) => o.name === op.inherits) : undefined;
  const children = ops.filter((o) => o.inherits === op.name);
  return Object.entries(op.dims).map(([name, meaning]) => {
    // Dims fixed when the parent call ran come first: this call's tensors are checked against them.
    const inherited = parent && bindingIn(parent, name);
    const own = inherited ? undefined : bindingIn(op, name);
    const child = own || inherited ? undefined : children.map((c) => [c, bindingIn(c, name)] as const).find(([, b]) => b);
    const boundBy = inherited
      ? `${inherited}, when ${parent!.name} ran`
      : (own ?? (child ? `per call: ${child[1]} of ${child[0].name}` : undefined));
    return { name, meaning, boundBy };
  });
}

function bindingIn(op: OpDecl, dim: string): string | undefined {
  for (const step of op.steps) {
    if (step.kind === 'int' && step.binds === dim) return `the \`${step.name}\` parameter${step.default ? ` (default ${step.default})` : ''}`;
    if (step.kind === 'tensor') {
      const axis = step.shape.indexOf(dim);
      if (axis >= 0) return `axis ${axis} of \`${step.name}\`${step.optional ? ' (when given)' : ''}`;
    }
  }
  return undefined;
}

export interface ArgRow {
  name: string;
  optional: boolean;
  type: string;
  doc: string;
}

export function argRows(op: OpDecl, ops: readonly OpDecl[]): ArgRow[] {
  const types = typer(op, ops);
  return op.steps.filter(isArg).map((a) => ({ name: a.name, optional: isOptional(a), type: types.arg(a), doc: a.doc }));
}

const isOptional = (a: Arg): boolean => ('optional' in a && a.optional === true) || a.kind === 'choice' || a.kind === 'flag';

/**
 * A readable TypeScript-like signature built from the declaration: shapes in
 * the contract's dim names, the shared float dtype as `DT`. The exact
 * generated type (with its compile-time checks) is `generatedSignature`.
 */
export function readableSignature(op: OpDecl, ops: readonly OpDecl[]): string {
  const t = typer(op, ops);
  const args = op.steps.filter(isArg);
  const note = (a: Arg): string => {
    if (a.kind === 'int') {
      const parts = [a.binds ? `binds ${a.binds}` : '', a.default ? `default ${a.default}` : '', a.even ? `even, at most ${a.even.atMost}` : '', a.multipleOf ? `a multiple of ${a.multipleOf.of}` : '', a.atMost ? `at most ${a.atMost.limit}` : ''];
      return parts.filter(Boolean).join('; ');
    }
    if (a.kind === 'choice') return `default '${a.default}'`;
    if (a.kind === 'flag') return `default ${a.default}`;
    if (a.kind === 'number') return numberRule(a);
    if (a.kind === 'ints') return `${a.length} non-negative integers${a.sumsToHalfOf ? `, summing to ${a.sumsToHalfOf}/2` : ''}`;
    return '';
  };
  const body = args.map((a) => {
    const n = note(a);
    return `  ${a.name}${isOptional(a) ? '?' : ''}: ${t.arg(a)},${n ? `  // ${n}` : ''}`;
  });
  const [owner, method] = op.name.includes('.') ? [op.name.split('.')[0]!, op.name.split('.')[1]!] : ['backend', op.name];
  const receiver = owner === 'backend' ? 'backend' : lowerFirst(owner);
  const dtIsOwn = args.some((a) => a.name === t.dtFrom);
  const generic = t.dtParam && dtIsOwn ? `<DT extends ${t.dtParam}>` : '';
  const params = `({\n${body.join('\n')}\n})`;
  const dtNote = t.dtFrom && !dtIsOwn ? `// DT: the dtype of ${t.dtFrom}, given to ${op.inherits}\n` : '';
  return `${dtNote}${receiver}.${method}${generic}${params}: ${returnType(op, ops, t)}`;
}

function returnType(op: OpDecl, ops: readonly OpDecl[], t: Typer): string {
  if (op.outputs.length > 0) return `{ ${op.outputs.map((o) => `${o.name}: ${o.dtype ? `Tensor<'${o.dtype}', [${o.shape.join(', ')}]>` : t.tensor(o.dtypeOf, o.shape)}`).join('; ')} }`;
  const made = ops.find((o) => o.inherits === op.name);
  return made ? `${made.name.split('.')[0]}<DT>` : 'void';
}

function numberRule(r: { min?: number; above?: number }): string {
  if (r.above !== undefined) return `finite, > ${r.above}`;
  if (r.min !== undefined) return `finite, >= ${r.min}`;
  return 'finite';
}

const lowerFirst = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);
const quoteAll = (dts: readonly string[]) => dts.map((d) => `'${d}'`).join(' | ');

interface Typer {
  /** The tensor whose dtype the others follow, shown as `DT`. */
  dtFrom: string | undefined;
  dtParam: string | undefined;
  arg(a: Arg): string;
  tensor(dtypeOf: string, shape: readonly string[]): string;
}

function typer(op: OpDecl, ops: readonly OpDecl[]): Typer {
  const parent = op.inherits ? ops.find((o) => o.name === op.inherits) : undefined;
  const tensors = [...op.steps, ...(parent?.steps ?? [])].filter((s): s is TensorArg => s.kind === 'tensor');
  const followed = op.steps.flatMap((s) => (s.kind === 'tensor' && 'sameAs' in s.dtype ? [s.dtype.sameAs] : s.kind === 'callback' ? [s.dtypeOf] : []));
  const dtFrom = followed[0] ?? (op.outputs[0]?.dtypeOf);
  const anchor = tensors.find((t) => t.name === dtFrom);
  const dtParam = anchor && 'oneOf' in anchor.dtype ? quoteAll(anchor.dtype.oneOf) : undefined;
  const dtype = (rule: DTypeRule): string => {
    if ('oneOf' in rule) return quoteAll(rule.oneOf);
    const same = rule.sameAs === dtFrom ? 'DT' : `dtype of ${rule.sameAs}`;
    return [same, ...(rule.or ?? []).map((d) => `'${d}'`)].join(' | ');
  };
  const shape = (s: readonly string[]) => `[${s.join(', ')}]`;
  const tensor = (dtypeOf: string, s: readonly string[]) => `Tensor<${dtypeOf === dtFrom ? 'DT' : `dtype of ${dtypeOf}`}, ${shape(s)}>`;
  const arg = (a: Arg): string => {
    switch (a.kind) {
      case 'tensor': {
        const base = `Tensor<${a.name === dtFrom ? 'DT' : dtype(a.dtype)}, ${shape(a.shape)}>`;
        if (a.streams) return `${base} /* or [${a.streams.count}, ${a.shape.join(', ')}] with ${a.streams.by} */`;
        return a.orNumber ? `${base} | number` : a.flattenable ? `${base} /* or [${a.shape[0]}, 1], [1, ${a.shape[0]}] */` : base;
      }
      case 'int':
      case 'number':
        return 'number';
      case 'choice':
        return quoteAll(a.options);
      case 'flag':
        return 'boolean';
      case 'ints':
        return `[${Array.from({ length: a.length }, () => 'number').join(', ')}]`;
      case 'callback':
        return a.signature.replace(/\bDT\b/g, a.dtypeOf === dtFrom ? 'DT' : `dtype of ${a.dtypeOf}`).replace(/readonly /g, '');
      case 'tagged':
        return Object.keys(a.variants).map((tag) => `{ ${a.tag}: '${tag}', ... }`).join(' | ');
    }
  };
  return { dtFrom, dtParam, arg, tensor };
}


/**
 * The generated declaration of an op, cut from @kvkit/contracts'
 * src/generated/backend.ts (where each op's validated wrapper is declared): the block after the doc comment that repeats
 * the op's summary, up to the `;` at the indentation it started at.
 */
export function generatedSignature(op: OpDecl, source = readGeneratedSignatures()): string | undefined {
  if (source === undefined) return undefined;
  const lines = source.split('\n');
  const at = lines.findIndex((l) => l.trim() === `/** ${op.summary} */`);
  if (at < 0) return undefined;
  const first = lines[at + 1] ?? '';
  const indent = first.length - first.trimStart().length;
  const block: string[] = [];
  for (const line of lines.slice(at + 1)) {
    block.push(line.slice(Math.min(indent, line.length - line.trimStart().length)));
    if (line.length - line.trimStart().length === indent && line.trimEnd().endsWith(';')) return block.join('\n');
  }
  return undefined;
}

export const generatedSignaturesFile = 'packages/contracts/src/generated/backend.ts';

function readGeneratedSignatures(): string | undefined {
  try {
    return readFileSync(resolve(repoRoot, generatedSignaturesFile), 'utf8');
  } catch {
    return undefined;
  }
}

/** Whether a catalog `raisedBy` name means this op: its full name, or for a method its name alone (`materialize`). */
export function isCallOf(call: string, op: OpDecl): boolean {
  return call === op.name || op.name.endsWith(`.${call}`);
}

export function opOfCall(call: string, ops: readonly OpDecl[]): OpDecl | undefined {
  return ops.find((op) => isCallOf(call, op));
}
