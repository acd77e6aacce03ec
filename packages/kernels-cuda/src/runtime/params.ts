import koffi from 'koffi';
import { PARAM_LAYOUTS } from '../generated/kernels.js';
import type { ParamFields, ParamStruct } from '../generated/kernels.js';

export type { ParamFields, ParamStruct } from '../generated/kernels.js';

const TWO_32 = 2 ** 32;

/**
 * One kernel's parameter bytes, written in place between launches (the
 * driver copies them at launch), plus the `void*[1]` array cuLaunchKernel
 * takes: nothing is allocated per launch. Each launch writes every field
 * (the block is reused, so a field left out would keep the last launch's
 * value), at the offsets of the generated layout, which the generated header
 * asserts on the device side.
 */
export class ParamBlock<S extends ParamStruct> {
  readonly struct: S;
  readonly bytes: Buffer;
  /** kernelParams for cuLaunchKernel: one pointer, to `bytes`. */
  readonly argv: Buffer;
  readonly #words: Uint32Array;
  readonly #doubles: Float64Array;
  /** The fields in declared order, each with its byte offset and whether it is a double. */
  readonly #names: readonly string[];
  readonly #offsets: readonly number[];
  readonly #isDouble: readonly boolean[];

  constructor(struct: S) {
    const layout = PARAM_LAYOUTS[struct];
    const fields: [string, { readonly offset: number; readonly kind: string }][] = Object.entries(layout.fields);
    this.struct = struct;
    this.#names = fields.map(([name]) => name);
    this.#offsets = fields.map(([, f]) => f.offset);
    this.#isDouble = fields.map(([, f]) => f.kind === 'f64');
    // At least 256 bytes, so V8 keeps the bytes off its heap and their address never moves.
    this.bytes = Buffer.alloc(Math.max(layout.bytes, 256));
    this.#words = new Uint32Array(this.bytes.buffer, this.bytes.byteOffset, layout.bytes / 4);
    this.#doubles = new Float64Array(this.bytes.buffer, this.bytes.byteOffset, layout.bytes / 8);
    this.argv = Buffer.alloc(256);
    this.argv.writeBigUInt64LE(koffi.address(this.bytes));
  }

  /**
   * Writes the whole block: device pointers and int64s as integers in the
   * safe range (±Infinity stands for the int64 extremes: no bound), doubles
   * as they are. The type names every declared field, so none can be left out.
   */
  write(values: ParamFields[S]): this {
    const byName = values as unknown as Readonly<Record<string, number>>;
    const names = this.#names;
    for (let i = 0; i < names.length; i++) {
      const value = byName[names[i]!];
      if (typeof value !== 'number') throw new Error(`${this.struct}.${names[i]} was given no number (${typeof value})`);
      if (this.#isDouble[i]) this.#doubles[this.#offsets[i]! / 8] = value;
      else this.#writeInt64(this.#offsets[i]! / 4, value);
    }
    return this;
  }

  #writeInt64(word: number, value: number): void {
    if (value === Infinity) {
      this.#words[word] = 0xffffffff;
      this.#words[word + 1] = 0x7fffffff;
    } else if (value === -Infinity) {
      this.#words[word] = 0;
      this.#words[word + 1] = 0x80000000;
    } else {
      const high = Math.floor(value / TWO_32);
      this.#words[word] = value - high * TWO_32;
      this.#words[word + 1] = high; // two's complement through the Uint32Array store
    }
  }
}
