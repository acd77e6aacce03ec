import koffi from 'koffi';
import { PARAM_LAYOUTS } from '../generated/kernels.js';
import type { ParamStruct } from '../generated/kernels.js';

export type { ParamStruct } from '../generated/kernels.js';

type Fields<S extends ParamStruct> = (typeof PARAM_LAYOUTS)[S]['fields'];
/** The fields of a struct whose kind is `K`. */
type FieldsOfKind<S extends ParamStruct, K extends string> = { [F in keyof Fields<S>]: Fields<S>[F] extends { readonly kind: K } ? F : never }[keyof Fields<S>] & string;
/** Fields set from an integer: device pointers and int64s. */
export type IntegerField<S extends ParamStruct> = FieldsOfKind<S, 'pointer' | 'i64'>;
export type DoubleField<S extends ParamStruct> = FieldsOfKind<S, 'f64'>;

const TWO_32 = 2 ** 32;

/**
 * One kernel's parameter bytes, written in place between launches (the
 * driver copies them at launch), plus the `void*[1]` array cuLaunchKernel
 * takes: nothing is allocated per launch. Fields go to the offsets of the
 * generated layout, which the generated header asserts on the device side.
 */
export class ParamBlock<S extends ParamStruct> {
  readonly struct: S;
  readonly bytes: Buffer;
  /** kernelParams for cuLaunchKernel: one pointer, to `bytes`. */
  readonly argv: Buffer;
  readonly #words: Uint32Array;
  readonly #doubles: Float64Array;
  readonly #fields: Fields<S>;

  constructor(struct: S) {
    const layout = PARAM_LAYOUTS[struct];
    this.struct = struct;
    this.#fields = layout.fields;
    // At least 256 bytes, so V8 keeps the bytes off its heap and their address never moves.
    this.bytes = Buffer.alloc(Math.max(layout.bytes, 256));
    this.#words = new Uint32Array(this.bytes.buffer, this.bytes.byteOffset, layout.bytes / 4);
    this.#doubles = new Float64Array(this.bytes.buffer, this.bytes.byteOffset, layout.bytes / 8);
    this.argv = Buffer.alloc(256);
    this.argv.writeBigUInt64LE(koffi.address(this.bytes));
  }

  #offset(field: string): number {
    return (this.#fields as Readonly<Record<string, { offset: number }>>)[field]!.offset;
  }

  /** A device pointer or an integer in the safe range; ±Infinity stands for the int64 extremes (no bound). */
  set(field: IntegerField<S>, value: number): this {
    const i = this.#offset(field) / 4;
    if (value === Infinity) {
      this.#words[i] = 0xffffffff;
      this.#words[i + 1] = 0x7fffffff;
    } else if (value === -Infinity) {
      this.#words[i] = 0;
      this.#words[i + 1] = 0x80000000;
    } else {
      const high = Math.floor(value / TWO_32);
      this.#words[i] = value - high * TWO_32;
      this.#words[i + 1] = high; // two's complement through the Uint32Array store
    }
    return this;
  }

  setDouble(field: DoubleField<S>, value: number): this {
    this.#doubles[this.#offset(field) / 8] = value;
    return this;
  }
}
