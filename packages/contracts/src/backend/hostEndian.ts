/** The host's byte order, and where an f64's high (sign, exponent) and low 32-bit words sit in a Uint32Array over it. */
export const LITTLE_ENDIAN = new Uint8Array(Uint16Array.of(1).buffer)[0] === 1;
export const HI = LITTLE_ENDIAN ? 1 : 0;
export const LO = 1 - HI;
