import type { Add, Gt, IsEven, Lt, Mod, Multiply } from 'ts-arithmetic';
import type { DType, Shape } from '../tensor.js';

/**
 * Compile-time shape checks. A literal dim is compared with the literal it
 * must equal; a `number` dim passes and is left to the runtime validator,
 * which raises the same code. A failed check leaves the argument requiring a
 * `ContractViolation` it cannot have, so tsc names the code in its error,
 * and the shape it expected where the check is about one.
 */
export interface ContractViolation<Code extends string, Message extends string, Expected = never> {
  /** The code and title of the check that failed, as tsc prints them in its error. */
  readonly kvkitContractViolation: `${Code}: ${Message}`;
  /** What the contract wanted, as far as it is known at compile time: the shape, or the dtypes it accepts. */
  readonly expected: Expected;
}

/** `unknown` (no constraint) when `Ok` is true; otherwise the violation the argument must satisfy. */
export type Check<Ok extends boolean, Code extends string, Message extends string, Expected = never> = [Ok] extends [true] ? unknown : ContractViolation<Code, Message, Expected>;

export type IsLiteral<N> = number extends N ? false : true;

/**
 * Two dims agree unless both are literal and differ. Same types agree first,
 * and `unknown` (an axis that binds its dim) agrees with anything, both
 * decided without looking inside: a dim typed as a type parameter of the
 * caller's own generic code then passes through to the runtime check.
 */
export type DimEq<A, B> = { a: A } extends { a: B } ? true : IsLiteral<A> extends true ? (IsLiteral<B> extends true ? ([A] extends [B] ? ([B] extends [A] ? true : false) : false) : true) : true;

/** Axis `I` of a shape; `number` where the shape is not a tuple or is too short. */
export type At<S extends Shape, I extends number> = number extends S['length'] ? number : S extends { readonly [K in I]: infer X extends number } ? X : number;

/** Shapes agree when the rank is unknown, or ranks match and every axis agrees. */
export type ShapeEq<S extends Shape, E extends readonly unknown[]> = number extends S['length'] ? true : S['length'] extends E['length'] ? AxesEq<S, E> : false;

type AxesEq<S extends Shape, E extends readonly unknown[]> = S extends readonly [infer A, ...infer RestS extends Shape]
  ? E extends readonly [infer B, ...infer RestE extends readonly unknown[]]
    ? DimEq<A, B> extends true
      ? AxesEq<RestS, RestE>
      : false
    : true
  : true;

/** The members of a union of shapes that have rank `N` (all of a shape of unknown rank). `S extends unknown` only distributes: it holds for a dim typed as a type parameter too. */
export type OfRank<S extends Shape, N extends number> = S extends unknown ? (RankIs<S, N> extends true ? S : never) : never;

/** The literal dim `K` of an object of dims; `number` where it is absent or not literal. */
export type DimOf<T, K extends PropertyKey> = T extends { readonly [P in K]: infer X extends number } ? X : number;

/**
 * A dim no member binds (`never`) is left to the runtime check, as `number`. Written as a union: as a
 * plain conditional, a dim typed as the caller's own type parameter would stay unresolved there and
 * no longer meet itself in `DimEq`.
 */
export type Known<X> = X | ([X] extends [never] ? number : never);

/** `unknown` when no member of a union argument violated its checks; otherwise the violations, each naming its code. */
export type MemberChecks<V> = [V] extends [never] ? unknown : V;

export type RankIs<S extends Shape, N extends number> = number extends S['length'] ? true : S['length'] extends N ? true : false;

/** A 1-D `[X]`, or `[X, 1]` / `[1, X]`, with `X` agreeing with `N`. */
export type FlatCountEq<S extends Shape, N> = number extends S['length']
  ? true
  : S extends readonly [infer A]
    ? DimEq<A, N>
    : S extends readonly [infer A, infer B]
      ? [B] extends [1]
        ? DimEq<A, N>
        : [A] extends [1]
          ? DimEq<B, N>
          : IsLiteral<A | B> extends true ? false : true
      : false;

export type FlatRankOk<S extends Shape> = number extends S['length'] ? true : S['length'] extends 1 ? true : S extends readonly [infer A, infer B] ? (IsLiteral<A> extends true ? (IsLiteral<B> extends true ? ([A] extends [1] ? true : [B] extends [1] ? true : false) : true) : true) : false;

/** Rank `N`, or rank `N + 1` with a leading axis of `C` streams (mRoPE's `[3, N]` positions). */
export type StreamsRankOk<S extends Shape, N extends number, C extends number> = number extends S['length']
  ? true
  : S['length'] extends N
    ? true
    : S extends readonly [infer A, ...infer Rest]
      ? Rest['length'] extends N
        ? DimEq<A, C>
        : false
      : false;

/** Product of dims; `number` as soon as one is not literal (digit-wise, so large dims do not hit recursion limits). */
export type Mul<A extends number, B extends number> = IsLiteral<A> extends true ? (IsLiteral<B> extends true ? Multiply<A, B> : number) : number;

/** Sum of dims (`C+R`); `number` as soon as one is not literal. */
export type Sum<A extends number, B extends number> = IsLiteral<A> extends true ? (IsLiteral<B> extends true ? Add<A, B> : number) : number;

export type IsPositiveInt<N extends number> = IsLiteral<N> extends true ? (`${N}` extends `-${string}` | `${string}.${string}` | '0' ? false : true) : true;

export type EvenAtMost<R extends number, D extends number> = IsLiteral<R> extends true
  ? IsEven<R> extends 1
    ? IsLiteral<D> extends true
      ? Gt<R, D> extends 1
        ? false
        : true
      : true
    : false
  : true;

/** A literal dim at most `Limit`; a `number` one passes to the runtime check. */
export type AtMost<N extends number, Limit extends number> = IsLiteral<N> extends true ? (Gt<N, Limit> extends 1 ? false : true) : true;

/** A literal dim at least `Min` (both literal); otherwise left to the runtime check. */
export type AtLeast<N extends number, Min extends number> = IsLiteral<N> extends true ? (IsLiteral<Min> extends true ? (Lt<N, Min> extends 1 ? false : true) : true) : true;

export type MultipleOf<A extends number, B extends number> = IsLiteral<A> extends true ? (IsLiteral<B> extends true ? (Mod<A, B> extends 0 ? true : false) : true) : true;

/** The dtype may be one of `Allowed`: only a dtype that certainly is not fails; a wider one (`DType`) passes to the runtime check. */
export type DTypeIn<DT extends DType, Allowed extends DType> = [Extract<DT, Allowed>] extends [never] ? false : true;

/** A literal option is one of `Options`; a plain `string` passes to the runtime check. */
export type OneOf<V extends string, Options extends string> = string extends V ? true : [V] extends [Options] ? true : false;

/**
 * What a callback that must finish before it returns may return: anything but
 * a promise or other thenable, so an `async` callback does not compile.
 */
// biome-ignore lint/suspicious/noConfusingVoidType: void is what a block-bodied callback returns; without it `() => {}` would not compile
export type NotThenable = void | null | undefined | string | number | boolean | bigint | symbol | (object & { readonly then?: never });
