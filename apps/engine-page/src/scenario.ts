/**
 * What the page runs, as the test replays it on the CPU reference: the
 * model's sizes, the seeds of every random array, the requests with their
 * page tables, each step's new tokens, the fork, and where the engine's
 * tensors sit inside its buffers. Both sides import this module, so they
 * agree by construction.
 */
export const SCENARIO = {
  hidden: 24,
  numQoHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  /** Partial rotary: the last 4 elements of each head pass through. */
  rotaryDim: 12,
  ropeStyle: 'neox',
  ropeBase: 10000,
  /** The engine's page table: slot = page * pageSize + offset, in one `[S, H, D]` pool per K and V. */
  pageSize: 4,
  pages: 8,
  seeds: { weight: 0x7e11, kCache: 0xc0de, vCache: 0xbeef, hidden: [0x51ab, 0x2bad] },
  /**
   * Byte offsets of the tensors inside the engine's buffers: element-aligned,
   * never a multiple of 256, so kvkit cannot lean on binding offsets.
   */
  byteOffsets: { qkv: 12, kCache: 0, vCache: 4, positions: 8, slots: 4, out: 20 },
} as const;

/** A request: its pages in order, and the tokens its K/V rows hold so far. */
export interface Request {
  readonly name: string;
  readonly pages: readonly number[];
  readonly cached: number;
}

/** The requests before the first step: prompts cached earlier (their rows are the pools' seeded values). Pages 4 and 7 are free. */
export const REQUESTS: readonly Request[] = [
  { name: 'A', pages: [1, 5], cached: 6 },
  { name: 'B', pages: [2, 4], cached: 3 },
  { name: 'C', pages: [6, 0, 3], cached: 9 },
];

/**
 * Copy-on-write fork after step 1: D continues A's prompt (a second sample).
 * It shares A's full pages and gets a copy of A's last page, which A is
 * still filling, in a free page of its own.
 */
export const FORK = { name: 'D', from: 'A', page: 7 } as const;

export interface StepSpec {
  readonly name: string;
  /** New tokens of each request this step, in batch order. */
  readonly tokens: readonly (readonly [string, number])[];
  /** Tokens after the real ones that pad the batch to a fixed size: slot -1, written nowhere, attending to nothing. */
  readonly padding: number;
}

export const STEPS: readonly StepSpec[] = [
  { name: 'verification', tokens: [['A', 1], ['B', 3], ['C', 1]], padding: 1 },
  { name: 'decode', tokens: [['A', 1], ['D', 1], ['B', 1], ['C', 1]], padding: 0 },
];

export const SLOTS = SCENARIO.pages * SCENARIO.pageSize;

/** Elements of one K or V cache: `[S, H, D]`. */
export const CACHE_ELEMENTS = SLOTS * SCENARIO.numKvHeads * SCENARIO.headDim;

/** Columns of the fused projection: every query head, then the K heads, then the V heads. */
export const QKV_WIDTH = (SCENARIO.numQoHeads + 2 * SCENARIO.numKvHeads) * SCENARIO.headDim;

/** The slot of a request's token at `position`: its page table, then the offset in the page. */
export function slotOf(pages: readonly number[], position: number): number {
  const page = pages[Math.floor(position / SCENARIO.pageSize)];
  if (page === undefined) throw new Error(`position ${position} is past the pages [${pages.join(', ')}]`);
  return page * SCENARIO.pageSize + (position % SCENARIO.pageSize);
}

/** Every slot a request's tokens hold, in position order. */
export function slotsOf(r: Request): number[] {
  return Array.from({ length: r.cached }, (_, p) => slotOf(r.pages, p));
}

/** What one step hands kvkit: ropePoolFused's positions and slots, and pagedAttention's offsets and slots. */
export interface StepPlan {
  readonly name: string;
  /** Tokens of the batch, padding included. */
  readonly tokens: number;
  /** The real ones: the rows of q that attention reads. */
  readonly queries: number;
  readonly positions: readonly number[];
  readonly slots: readonly number[];
  readonly requests: readonly { readonly name: string; readonly queries: number; readonly cached: number; readonly slots: readonly number[] }[];
  readonly qIndptr: readonly number[];
  readonly kvIndptr: readonly number[];
  readonly kvSlots: readonly number[];
}

/** The copy of the fork: A's rows in its last page, into D's page. */
export interface ForkPlan {
  readonly fromSlots: readonly number[];
  readonly toSlots: readonly number[];
  /** The pages D shares with A, rows not copied. */
  readonly shared: readonly number[];
}

/** The whole run: each step's plan and the fork's copy, from the requests above. */
export function plan(): { steps: StepPlan[]; fork: ForkPlan } {
  const live = new Map(REQUESTS.map((r) => [r.name, { ...r }]));
  const steps: StepPlan[] = [];
  let fork: ForkPlan | undefined;
  for (const [i, spec] of STEPS.entries()) {
    if (i === 1) {
      const from = live.get(FORK.from)!;
      const full = Math.floor(from.cached / SCENARIO.pageSize);
      const copied = Array.from({ length: from.cached - full * SCENARIO.pageSize }, (_, j) => full * SCENARIO.pageSize + j);
      const pages = [...from.pages.slice(0, full), FORK.page];
      fork = { fromSlots: copied.map((p) => slotOf(from.pages, p)), toSlots: copied.map((p) => slotOf(pages, p)), shared: from.pages.slice(0, full) };
      live.set(FORK.name, { name: FORK.name, pages, cached: from.cached });
    }
    const positions: number[] = [];
    const slots: number[] = [];
    const requests: StepPlan['requests'][number][] = [];
    for (const [name, count] of spec.tokens) {
      const r = live.get(name)!;
      for (let t = 0; t < count; t++) {
        positions.push(r.cached + t);
        slots.push(slotOf(r.pages, r.cached + t));
      }
      r.cached += count;
      requests.push({ name, queries: count, cached: r.cached, slots: slotsOf(r) });
    }
    const queries = positions.length;
    for (let p = 0; p < spec.padding; p++) {
      positions.push(0);
      slots.push(-1);
    }
    const prefix = (lengths: number[]) => {
      const offsets = [0];
      for (const n of lengths) offsets.push(offsets.at(-1)! + n);
      return offsets;
    };
    steps.push({
      name: spec.name,
      tokens: positions.length,
      queries,
      positions,
      slots,
      requests,
      qIndptr: prefix(requests.map((r) => r.queries)),
      kvIndptr: prefix(requests.map((r) => r.cached)),
      kvSlots: requests.flatMap((r) => r.slots),
    });
  }
  return { steps, fork: fork! };
}

/**
 * `count` floats in [-1, 1) from a 32-bit xorshift generator, each exactly
 * representable in f32 (24 random bits), so the page's Float32Array and
 * the test's numbers hold the same values.
 */
export function randomFloats(seed: number, count: number): Float32Array {
  let state = seed >>> 0 || 1;
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    out[i] = (state >>> 8) / 2 ** 23 - 1;
  }
  return out;
}

/** What a wrong call would have written over: the engine's output buffer is filled with this first. */
export const PATTERN = -1024;

/** A call the page makes wrong on purpose, and what came of it. */
export interface WrongCall {
  readonly what: string;
  /** The ContractError's code, and whether the call threw it or the next `backend.sync()` reported it. */
  readonly code?: string;
  readonly when: 'call' | 'sync' | 'never';
  readonly message: string;
}

/** One step as the page ran it, every array as the 32-bit words it read back. */
export interface StepReport {
  readonly qkvBits: number[];
  readonly qRotBits: number[];
  readonly kRotBits: number[];
  /** The engine's caches `[S, H, D]` after the step's ropePoolFused. */
  readonly kCacheBits: number[];
  readonly vCacheBits: number[];
  /** pagedAttention's output `[queries, Hq, D]` in the engine's buffer, and its log-sum-exp `[queries, Hq]`. */
  readonly outBits: number[];
  readonly lseBits: number[];
  /** Command buffers kvkit submitted during each call: its work on the engine's buffers goes before it returns. */
  readonly submits: { readonly ropePoolFused: number; readonly pagedAttention: number };
}

/** What the page reports on `window.engineRun`. */
export interface EngineRunReport {
  readonly ok: true;
  readonly adapter: string;
  readonly backend: string;
  /** What `gpuBufferOf` says of the tensors kvkit worked on in step 1: the engine's buffer, byte offset, strides in elements. */
  readonly views: readonly { readonly name: string; readonly inEngineBuffer: boolean; readonly byteOffset: number; readonly strides: readonly number[] }[];
  readonly steps: readonly StepReport[];
  /** The caches after the fork's copySlots, and the submits it made. */
  readonly fork: { readonly kCacheBits: number[]; readonly vCacheBits: number[]; readonly submits: number };
  readonly wrongCalls: readonly WrongCall[];
  /** The engine's output buffer of the wrong calls, after them. */
  readonly wrongOutBits: number[];
  /** The text the page shows. */
  readonly text: string;
}

export interface EngineRunFailure {
  readonly ok: false;
  readonly error: string;
  readonly code?: string;
}

export type EngineRunResult = EngineRunReport | EngineRunFailure;
