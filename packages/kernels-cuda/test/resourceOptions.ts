import type { ResourceOptions } from '@kvkit/conformance';
import { cudaBackendInfo } from '../src/index.js';

/**
 * How the resource suite watches a CUDA backend: its live allocations must
 * hold flat. Under compute-sanitizer racecheck (tools/device/run.sh sets
 * KVKIT_SANITIZER) the tool keeps state for each launch's shared memory
 * inside this process: RSS grew 548 MB over 100 ropePoolFused calls there,
 * whose token tiles stage rows in shared memory, where 10,000 calls
 * uninstrumented stay within the bound. The JS heap and the allocations are
 * bounded either way.
 */
export const cudaResourceOptions: ResourceOptions = {
  buffers: (b) => cudaBackendInfo(b).liveAllocations,
  buffersAreLive: true,
  ...(process.env.KVKIT_SANITIZER === 'racecheck' ? { rssUnboundedBecause: "compute-sanitizer racecheck's own state for each launch's shared memory" } : {}),
};
