import type { DimExpr } from './declare.js';

/** A dim expression as a product of integer literals and dim names. */
export interface Product {
  readonly constant: number;
  readonly names: readonly string[];
}

/** A dim expression as its terms: `C+R` is two products, `2*H*D` one. */
export function parseTerms(expr: DimExpr): Product[] {
  return expr.split('+').map(parseDim);
}

/** One product term; a sum is split by parseTerms first. */
export function parseDim(expr: DimExpr): Product {
  let constant = 1;
  const names: string[] = [];
  for (const raw of expr.split('*')) {
    const factor = raw.trim();
    if (/^\d+$/.test(factor)) constant *= Number(factor);
    else if (/^[A-Za-z][A-Za-z0-9]*$/.test(factor)) names.push(factor);
    else throw new Error(`bad dim expression '${expr}'`);
  }
  return { constant, names };
}

/** The value of a dim expression, or undefined while one of its dims is unbound. */
export function evalDim(expr: DimExpr, dims: Readonly<Record<string, number>>): number | undefined {
  let sum = 0;
  for (const { constant, names } of parseTerms(expr)) {
    let v = constant;
    for (const n of names) {
      const d = dims[n];
      if (d === undefined) return undefined;
      v *= d;
    }
    sum += v;
  }
  return sum;
}

/** True for an expression that is one dim name: the first tensor axis it meets binds it. */
export function isDimName(expr: DimExpr): boolean {
  if (expr.includes('+')) return false;
  const p = parseDim(expr);
  return p.constant === 1 && p.names.length === 1;
}
