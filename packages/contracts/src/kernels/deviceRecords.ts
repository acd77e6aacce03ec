import { cudaRecord } from './declare.js';

/** Device records the CUDA kernels keep between launches; the host reads or sizes them. */
export const deviceRecords = [
  cudaRecord({
    struct: 'BadValueRecord',
    doc: 'The first value outside its range that any kernel met since the last sync; the earliest check, then the earliest token, wins.',
    fields: {
      key: { type: 'u64', doc: '(check << 32) | token' },
      value: { type: 'i64', doc: 'the value found' },
      lock: { type: 'i32', doc: 'held while key and value are written together' },
      rejectedCall: { type: 'i32', doc: 'the number of the latest call whose value check failed: its writing kernels write nothing' },
    },
  }),
  cudaRecord({
    struct: 'SlotOwner',
    doc: 'One entry of the open-addressing table that picks, per slot named in a call, the last token naming it.',
    fields: {
      key: { type: 'u64', doc: '(generation << 40) | slot' },
      owner: { type: 'u64', doc: '(generation << 40) | token' },
    },
  }),
];
