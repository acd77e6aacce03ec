import type { DType } from '../tensor.js';

/**
 * The contract language. An op is data: named dims, then its arguments in the
 * order they are checked, each check carrying the code it raises. The
 * generator turns this into typed signatures, validators and the catalog
 * skeleton; nothing else states a shape rule.
 */

/** A dim name (`T`), an integer literal (`2`), a product of both (`2*H*D`), or a sum of those (`C+R`). */
export type DimExpr = string;

/** A check's code and its message template; `{name}` marks a placeholder. */
export interface ErrorDecl {
  readonly title: string;
  readonly message: string;
  /** What to do, most likely first: `ContractError.fixes`, and the Solutions of the code's catalog page. */
  readonly fixes: readonly string[];
  /** No check raises it any more; it stays declared so its code is never reused and its page stays up. */
  readonly retired?: true;
  /** Raised by a backend's runtime (start-up, driver), not by a validator: the calls that can raise it. */
  readonly raisedBy?: readonly string[];
}

export type ErrorTable = Readonly<Record<string, ErrorDecl>>;

/** The dtypes a tensor argument accepts: a fixed list, or another argument's dtype. */
export type DTypeRule =
  | { readonly oneOf: readonly DType[] }
  /** The dtype of another tensor argument, or one of `or`. */
  | { readonly sameAs: string; readonly or?: readonly DType[] };

/** A tensor argument of an op: its dtype rule, its shape in the contract's dims, and the code each check raises. */
export interface TensorArg {
  readonly kind: 'tensor';
  readonly name: string;
  readonly doc: string;
  readonly dtype: DTypeRule;
  readonly shape: readonly DimExpr[];
  /** Code for a wrong shape (and a wrong rank, unless `rankCode` is given). */
  readonly code: string;
  readonly rankCode?: string;
  readonly optional?: boolean;
  /** Accept `[X, 1]` and `[1, X]` for a 1-D `[X]` (flattened). */
  readonly flattenable?: boolean;
  /** Also accept a plain number (e.g. one eps for every layer), checked as `number` is. */
  readonly orNumber?: NumberRule;
  /** Other shapes accepted besides `shape` (a scale given per tensor `[1]` or per head `[H]`); every dim they name is bound before. */
  readonly orShapes?: readonly (readonly DimExpr[])[];
  /** The shape depends on a choice argument declared before (a pool layout): its options whose shape is not `shape`. */
  readonly byChoice?: ShapeByChoice;
  /** Several position streams (mRoPE): `[count, ...shape]` exactly when the `by` argument is given. */
  readonly streams?: StreamsRule;
  /** A dim this tensor's shape binds is at least `min`, a dim expression bound before (a head dim and the RoPE part that ends it). */
  readonly dimAtLeast?: { readonly dim: string; readonly min: DimExpr; readonly code: string };
}

/** Shapes keyed by the value of a choice argument; values not listed take the tensor's own `shape`, `code` and `rankCode`. */
export interface ShapeByChoice {
  readonly choice: string;
  readonly options: Readonly<Record<string, ChoiceShape>>;
}

export interface ChoiceShape {
  readonly shape: readonly DimExpr[];
  readonly code: string;
  readonly rankCode?: string;
  /** Dims this shape implies, bound once it has passed (a paged pool's slot count `S = numPages*pageSize`). */
  readonly binds?: Readonly<Record<string, DimExpr>>;
}

/**
 * A tensor that holds one row per stream when a parameter says so: with `by`
 * given it must be `[count, ...shape]` (else `code`); without it, a
 * `[count, ...shape]` tensor raises `unexpectedCode` rather than a rank error.
 */
export interface StreamsRule {
  readonly count: number;
  readonly by: string;
  readonly code: string;
  readonly unexpectedCode: string;
}

export interface NumberRule {
  /** Inclusive lower bound. */
  readonly min?: number;
  /** Exclusive lower bound. */
  readonly above?: number;
  readonly code: string;
}

export interface IntArg {
  readonly kind: 'int';
  readonly name: string;
  readonly doc: string;
  /** The dim this parameter names. */
  readonly binds?: string;
  readonly optional?: boolean;
  /** Value when omitted: a dim expression over dims bound before. */
  readonly default?: DimExpr;
  readonly code: string;
  readonly even?: { readonly atMost: DimExpr; readonly code: string };
  readonly multipleOf?: { readonly of: DimExpr; readonly code: string };
  /** An inclusive upper bound the kernels are built for (a head dim that fits their tiles). */
  readonly atMost?: { readonly limit: number; readonly code: string };
  /** An inclusive upper bound that is a dim bound before (a value head dim within the key head dim). */
  readonly atMostDim?: { readonly of: DimExpr; readonly code: string };
}

export interface NumberArg extends NumberRule {
  readonly kind: 'number';
  readonly name: string;
  readonly doc: string;
  readonly optional?: boolean;
}

export interface ChoiceArg {
  readonly kind: 'choice';
  readonly name: string;
  readonly doc: string;
  readonly options: readonly string[];
  readonly default: string;
  readonly code: string;
}

/** A boolean parameter with a default (attention's `causal`). */
export interface FlagArg {
  readonly kind: 'flag';
  readonly name: string;
  readonly doc: string;
  readonly default: boolean;
  readonly code: string;
}

/** A fixed-length list of non-negative integers (mRoPE's section sizes), optionally summing to half a dim (R/2 rotary pairs). */
export interface IntListArg {
  readonly kind: 'ints';
  readonly name: string;
  readonly doc: string;
  readonly length: number;
  readonly sumsToHalfOf?: DimExpr;
  readonly optional?: boolean;
  readonly code: string;
}

export interface CallbackArg {
  readonly kind: 'callback';
  readonly name: string;
  readonly doc: string;
  readonly code: string;
  /** TypeScript signature, in terms of the op's dims and `DT`. */
  readonly signature: string;
  /** The tensor argument whose dtype `DT` stands for. */
  readonly dtypeOf: string;
}

/** Exactly one of the named arguments is given. */
export interface ExactlyOneRule {
  readonly kind: 'exactlyOne';
  readonly names: readonly string[];
  readonly code: string;
}

/** `name` is given exactly when at least one of `with` is (eps and the norm weights it goes with). */
export interface RequiresRule {
  readonly kind: 'requires';
  readonly name: string;
  readonly with: readonly string[];
  readonly code: string;
}

/** The named tensors, when given, are different tensors. */
export interface DistinctRule {
  readonly kind: 'distinct';
  readonly names: readonly [string, string];
  readonly code: string;
}

/** The named tensors, when given, are contiguous: they are written in place, where a gap could not be skipped. */
export interface ContiguousRule {
  readonly kind: 'contiguous';
  readonly names: readonly string[];
  readonly code: string;
}

/**
 * Which of the tokens naming one slot in a call writes it: 'last' is the
 * highest token index, as a loop over the tokens in order leaves it. That
 * token's rows land whole (every head, both pools); the others write none.
 */
export type DuplicateRule = 'last';

/** A rule on the values of an index tensor: checked on the host where they live there, on the device otherwise. */
export interface ValueRule {
  readonly kind: 'values';
  readonly name: string;
  /** Inclusive lower bound, unless `negativeSkips`. */
  readonly min?: number;
  /** Exclusive lower bound (a float parameter that must be positive: an fp8 scale). */
  readonly above?: number;
  /** Exclusive upper bound; unchecked while its dim is unbound. Index rules give one; a float rule may not. */
  readonly below?: DimExpr;
  /** A float parameter (eps, a scale): NaN and ±Inf break the rule too. */
  readonly finite?: boolean;
  /** A negative value means "skip this token" and is valid. */
  readonly negativeSkips?: boolean;
  /** An exclusive bound kept even while `below`'s dim is unbound, raising its own code. */
  readonly ceiling?: { readonly below: number; readonly code: string };
  /** Values are destinations (pool slots): several tokens naming one resolve by this rule, never to a mix. */
  readonly duplicates?: DuplicateRule;
  readonly code: string;
}

/**
 * An index tensor of offsets into the rows of other tensors (an indptr,
 * `[B + 1]`): it starts at 0, never decreases and ends at `total`, so
 * segment b is rows `[x[b], x[b + 1])`. Checked on the host where the values
 * live there, on the device otherwise (`DeviceSegmentCheck`).
 */
export interface OffsetsRule {
  readonly kind: 'offsets';
  readonly name: string;
  /** The row count the last offset must equal. */
  readonly total: DimExpr;
  readonly code: string;
}

/**
 * Two offsets tensors of one length: segment b of `name` is no longer than
 * segment b of `within` (a request's queries are among its cached tokens).
 * Checked after both tensors' own offsets rules.
 */
export interface SegmentsWithinRule {
  readonly kind: 'segmentsWithin';
  readonly name: string;
  readonly within: string;
  readonly code: string;
}

/** One numeric field of a tagged variant. */
export interface TaggedField {
  readonly doc: string;
  readonly optional?: boolean;
  /** Value when omitted (an optional field without one stays undefined). */
  readonly default?: number;
  readonly integer?: boolean;
  /** Inclusive lower bound. */
  readonly min?: number;
  /** Exclusive lower bound. */
  readonly above?: number;
  /** Raised instead of the arg's `valueCode` when only the bound is broken (a finite number below it). */
  readonly boundCode?: string;
  /**
   * A list of numbers in place of one: one entry per pair of the dim it names (`R`: R/2 entries, LongRoPE's
   * per-frequency factors). Anything but an array of that length raises `lengthCode`; an entry that is not a
   * finite number within `min` and `above` raises `entryCode`.
   */
  readonly list?: { readonly halfOf: DimExpr; readonly lengthCode: string; readonly entryCode: string };
}

/** Within one variant, field `lower` must stay below field `upper` (defaults applied), or at most it where `equalAllowed`. */
export interface TaggedOrder {
  readonly variant: string;
  readonly lower: string;
  readonly upper: string;
  readonly equalAllowed?: boolean;
}

/**
 * A parameter that is an object tagged by one string field (`type`), each tag
 * with its own numeric fields: Hugging Face's `rope_scaling`. The generated
 * type is the exact union of the variants, so a wrong key does not compile.
 */
export interface TaggedArg {
  readonly kind: 'tagged';
  readonly name: string;
  readonly doc: string;
  /** The generated type's name, e.g. `RopeScaling`. */
  readonly typeName: string;
  readonly optional?: boolean;
  /** The field naming the variant. */
  readonly tag: string;
  readonly variants: Readonly<Record<string, { readonly doc: string; readonly fields: Readonly<Record<string, TaggedField>> }>>;
  readonly orders?: readonly TaggedOrder[];
  /** Only meaningful together with this argument: given without it raises `comboCode`. */
  readonly requires?: string;
  /** Not an object, or an unknown tag. */
  readonly code: string;
  /** A required field missing, or a key no variant field has. */
  readonly fieldCode: string;
  /** A field that is not a finite number (an integer where asked) within its bounds. */
  readonly valueCode: string;
  /** Fields or arguments that are each valid but do not go together. */
  readonly comboCode: string;
}

/**
 * Optional tensors that go with a dtype of another tensor (the scales of an
 * fp8 pool): all given when its dtype is one of `dtypes`, none otherwise.
 */
export interface GivenForDtypeRule {
  readonly kind: 'givenForDtype';
  readonly names: readonly string[];
  readonly tensor: string;
  readonly dtypes: readonly DType[];
  /** One of `names` is missing while the tensor's dtype needs them. */
  readonly missingCode: string;
  /** One of `names` is given while the tensor's dtype takes none. */
  readonly refusedCode: string;
}

/**
 * A flag that lays a section list out another way (mRoPE's interleaved layout, Qwen3-VL): true only where the
 * list is given (else `missingCode`); then the counts after the first, each taken every third pair from its
 * stream's offset (1, then 2), must fit among the half-of-`halfOf` pairs (else `code`).
 */
export interface InterleavedSectionRule {
  readonly kind: 'interleavedSection';
  readonly flag: string;
  readonly section: string;
  readonly halfOf: DimExpr;
  readonly missingCode: string;
  readonly code: string;
}

/** An argument of an op, one kind per declaration helper (`tensor`, `int`, `number`, `choice`, ...). */
export type Arg = TensorArg | IntArg | NumberArg | ChoiceArg | FlagArg | CallbackArg | IntListArg | TaggedArg;
/** A check across arguments (exactly one given, distinct names, contiguous outputs, value rules, ...). */
export type Rule = ExactlyOneRule | DistinctRule | ContiguousRule | ValueRule | OffsetsRule | SegmentsWithinRule | RequiresRule | GivenForDtypeRule | InterleavedSectionRule;
/** One step of an op's contract, checked in order: an argument or a rule. */
export type Step = Arg | Rule;

/** An output an op returns (or writes into, when the caller passes it): its dtype and shape. */
export interface OutputDecl {
  readonly name: string;
  /** Same dtype as this tensor argument (unless `dtype` fixes one). */
  readonly dtypeOf: string;
  /** A dtype of its own whatever the inputs' (attention's f32 log-sum-exp). */
  readonly dtype?: DType;
  readonly shape: readonly DimExpr[];
  readonly doc: string;
  /** Returned only where this optional argument is given (rotated queries only where there are queries). */
  readonly given?: string;
}

/** An op's whole contract: its name, dims, steps, outputs and error table, from which its signature, validator, catalog entries and docs page are generated. */
export interface OpDecl {
  /** The name users call: a backend method, or `Class.method`. */
  readonly name: string;
  readonly summary: string;
  readonly dims: Readonly<Record<string, string>>;
  /** Dims bound by another op's call (a stateful op's constructor) before this one runs. Set by `stateful`, not by hand. */
  readonly inherits?: string;
  /** The stateful object this op creates (`KvMaterializer`). Set by `stateful`, not by hand. */
  readonly makes?: string;
  readonly errors: ErrorTable;
  readonly steps: readonly Step[];
  readonly outputs: readonly OutputDecl[];
  /**
   * Backends may not run it yet: its kernel is optional in `BackendKernels`,
   * `backend.ops` lists it only where the kernel is there, and a call where it
   * is not throws once its arguments are validated. Dropped once every backend has it.
   */
  readonly optionalKernel?: true;
}

/** A method of a stateful op: it runs on the object its constructor made and sees the dims and dtypes the constructor bound. */
export type MethodDecl = Omit<OpDecl, 'dims' | 'inherits' | 'makes'>;

/**
 * An op that makes an object holding state (weights, caches, workspaces)
 * whose methods are validated calls of their own. Every method inherits the
 * constructor's dims and the dtypes of its tensors, so a method's rule can
 * name `kvWeight` or `hidden` without taking them again.
 */
export interface StatefulDecl {
  /** The type users hold, e.g. `KvMaterializer`; its methods are called `KvMaterializer.<method>`. */
  readonly name: string;
  readonly create: OpDecl;
  readonly methods: readonly MethodDecl[];
  /** What `dispose()` frees. */
  readonly disposes: string;
}

/** A backend call that is not an op contract (tensor creation, reads) but whose codes the catalog lists: `raises` names them. */
export interface CallDecl {
  readonly name: string;
  readonly summary: string;
  readonly raises: readonly string[];
}

/** A family of ops declared in one file, with the codes they own. */
export interface ContractFile {
  readonly errors: ErrorTable;
  readonly ops: readonly OpDecl[];
  readonly stateful?: readonly StatefulDecl[];
  readonly calls?: readonly CallDecl[];
}

/** Declares a stateful op: the constructor op, and its methods as ops named `Name.method` that inherit the constructor's dims. */
export const stateful = (decl: StatefulDecl): StatefulDecl => decl;

/** The ops of a stateful declaration as flat op declarations: the constructor, then each method. */
export function statefulOps(s: StatefulDecl): OpDecl[] {
  return [
    { ...s.create, makes: s.name },
    ...s.methods.map((m) => ({ ...m, name: `${s.name}.${m.name}`, dims: s.create.dims, inherits: s.create.name })),
  ];
}

export const tensor = (name: string, spec: Omit<TensorArg, 'kind' | 'name'>): TensorArg => ({ kind: 'tensor', name, ...spec });
export const int = (name: string, spec: Omit<IntArg, 'kind' | 'name'>): IntArg => ({ kind: 'int', name, ...spec });
export const number = (name: string, spec: Omit<NumberArg, 'kind' | 'name'>): NumberArg => ({ kind: 'number', name, ...spec });
export const choice = (name: string, spec: Omit<ChoiceArg, 'kind' | 'name'>): ChoiceArg => ({ kind: 'choice', name, ...spec });
export const flag = (name: string, spec: Omit<FlagArg, 'kind' | 'name'>): FlagArg => ({ kind: 'flag', name, ...spec });
export const offsets = (name: string, spec: Omit<OffsetsRule, 'kind' | 'name'>): OffsetsRule => ({ kind: 'offsets', name, ...spec });
export const segmentsWithin = (name: string, within: string, code: string): SegmentsWithinRule => ({ kind: 'segmentsWithin', name, within, code });
export const ints = (name: string, spec: Omit<IntListArg, 'kind' | 'name'>): IntListArg => ({ kind: 'ints', name, ...spec });
export const requires = (name: string, withArgs: readonly string[], code: string): RequiresRule => ({ kind: 'requires', name, with: withArgs, code });
export const callback = (name: string, spec: Omit<CallbackArg, 'kind' | 'name'>): CallbackArg => ({ kind: 'callback', name, ...spec });
export const tagged = (name: string, spec: Omit<TaggedArg, 'kind' | 'name'>): TaggedArg => ({ kind: 'tagged', name, ...spec });
export const exactlyOne = (names: readonly string[], code: string): ExactlyOneRule => ({ kind: 'exactlyOne', names, code });
export const distinct = (names: readonly [string, string], code: string): DistinctRule => ({ kind: 'distinct', names, code });
export const contiguous = (names: readonly string[], code: string): ContiguousRule => ({ kind: 'contiguous', names, code });
export const values = (name: string, spec: Omit<ValueRule, 'kind' | 'name'>): ValueRule => ({ kind: 'values', name, ...spec });
export const interleavedSection = (spec: Omit<InterleavedSectionRule, 'kind'>): InterleavedSectionRule => ({ kind: 'interleavedSection', ...spec });
export const givenForDtype = (names: readonly string[], spec: Omit<GivenForDtypeRule, 'kind' | 'names'>): GivenForDtypeRule => ({ kind: 'givenForDtype', names, ...spec });

export const FLOAT = { oneOf: ['f32', 'f16', 'bf16'] } as const satisfies DTypeRule;
export const INDEX = { oneOf: ['i32', 'i64'] } as const satisfies DTypeRule;
export const F32 = { oneOf: ['f32'] } as const satisfies DTypeRule;
export const FP8 = ['fp8e4m3', 'fp8e5m2'] as const satisfies readonly DType[];
export const sameAs = (name: string, ...or: DType[]): DTypeRule => ({ sameAs: name, or });

/** Keeps the literal codes of an error table while checking its form. */
export const errors = <const E extends ErrorTable>(table: E): E => table;
