import koffi from 'koffi';

/**
 * The kernels' parameter blocks, field by field, in the order of the structs
 * in src/cuda/params.cuh (a test compares the two). Every field is 8 bytes:
 * a device pointer, a 64-bit integer, or (FillParams.scale) a double.
 */
export const PARAM_LAYOUTS = {
  FusedNormRopeParams: [
    'kv', 'kNormWeight', 'eps', 'cosSinCache', 'ropeFrequencies', 'positions', 'slots', 'kOut', 'vOut', 'badValue',
    'numTokens', 'numLayers', 'numKvHeads', 'headDim', 'rotaryDim', 'kvTokenStride', 'kvLayerStride', 'vOffset',
    'outLayerStride', 'gptj', 'weightIsF32', 'cacheDType', 'cacheVectors', 'positionsAreI64', 'slotsAreI64', 'positionMin',
    'positionBelow', 'positionCheck', 'slotBelow', 'slotCheck', 'slotOwners', 'slotOwnersMask', 'generation',
    'rowsPerUnit', 'unitsPerToken', 'lanesPerRow',
  ],
  RopePoolParams: [
    'q', 'k', 'v', 'ropeFrequencies', 'positions', 'slots', 'qRot', 'kRot', 'kPool', 'vPool', 'badValue',
    'numTokens', 'numQoHeads', 'numKvHeads', 'headDim', 'rotaryDim', 'gptj', 'positionsAreI64', 'slotsAreI64',
    'slotBelow', 'slotCheck', 'slotOwners', 'slotOwnersMask', 'generation', 'rowsPerUnit', 'unitsPerToken', 'lanesPerRow',
  ],
  ClaimSlotsParams: ['slots', 'slotOwners', 'numTokens', 'slotsAreI64', 'slotBelow', 'slotOwnersMask', 'generation'],
  GemmParams: ['a', 'b', 'c', 'm', 'n', 'k', 'batchStrideB', 'batchStrideC'],
  CopyParams: ['src', 'dst', 'vectors'],
  SpinParams: ['nanoseconds'],
  FillParams: ['data', 'count', 'seed', 'scale'],
} as const;

export type ParamStruct = keyof typeof PARAM_LAYOUTS;
export type FieldOf<S extends ParamStruct> = (typeof PARAM_LAYOUTS)[S][number];

const TWO_32 = 2 ** 32;

/**
 * One kernel's parameter bytes, written in place between launches (the
 * driver copies them at launch), plus the `void*[1]` array cuLaunchKernel
 * takes: nothing is allocated per launch.
 */
export class ParamBlock<S extends ParamStruct> {
  readonly bytes: Buffer;
  /** kernelParams for cuLaunchKernel: one pointer, to `bytes`. */
  readonly argv: Buffer;
  readonly #words: Uint32Array;
  readonly #doubles: Float64Array;
  readonly #index: Record<string, number>;

  constructor(struct: S) {
    const fields = PARAM_LAYOUTS[struct];
    // At least 256 bytes, so V8 keeps the bytes off its heap and their address never moves.
    this.bytes = Buffer.alloc(Math.max(fields.length * 8, 256));
    this.#words = new Uint32Array(this.bytes.buffer, this.bytes.byteOffset, fields.length * 2);
    this.#doubles = new Float64Array(this.bytes.buffer, this.bytes.byteOffset, fields.length);
    this.#index = Object.fromEntries(fields.map((f, i) => [f, i]));
    this.argv = Buffer.alloc(256);
    this.argv.writeBigUInt64LE(koffi.address(this.bytes));
  }

  /** A device pointer or an integer in the safe range; ±Infinity stands for the int64 extremes (no bound). */
  set(field: FieldOf<S>, value: number): this {
    const i = this.#index[field]! * 2;
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

  setDouble(field: FieldOf<S>, value: number): this {
    this.#doubles[this.#index[field]!] = value;
    return this;
  }
}
