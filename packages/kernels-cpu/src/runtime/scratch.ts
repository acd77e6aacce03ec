// Kernels never call user code while they use these, so one set per process is enough.
let head = new Float64Array(256);
let cosSin = new Float64Array(256);

/** f64 room for one head's values. */
export function headScratch(n: number): Float64Array {
  if (head.length < n) head = new Float64Array(n);
  return head;
}

/** f64 room for one cos/sin row. */
export function cosSinScratch(n: number): Float64Array {
  if (cosSin.length < n) cosSin = new Float64Array(n);
  return cosSin;
}
