import { errors } from '../dsl/declare.js';
import type { CallDecl } from '../dsl/declare.js';

/** Codes every op can raise: argument form, tensor identity, dtypes, and the parameters shared by all ops. */
export const commonErrors = errors({
  KV001: {
    title: 'Argument is not a kvkit tensor',
    message: '{arg} must be a kvkit Tensor; got {actual}',
    fixes: [
      "Wrap the values once with `backend.tensor(dtype, shape, data)`, e.g. `backend.tensor('i32', [T], positionsArray)`, and pass the tensor.",
      'Check that every required argument is present in the arguments object and spelled exactly as in the API (a misspelt one arrives as `undefined`).',
      'For `backend.tensor`, pass a plain array or a typed array (wrap an `ArrayBuffer` as `new Float32Array(buffer)`).',
      'Keep per-step metadata (positions, slots) as kvkit tensors in your scheduler instead of converting at every call.',
    ],
  },
  KV002: {
    title: 'Tensor from another backend',
    message: '{arg} was made by {actual}; this call runs on {expected}',
    fixes: [
      'Create one backend per device and share it; make every tensor of a call with that same `backend`.',
      'To move data across backends, read it and upload it again: `other.tensor(t.dtype, t.shape, await backend.read(t))`.',
      'After recreating a backend, re-create all weights, caches and pools on the new instance.',
      "Check `t.backend` (`'cpu'`, `'webgpu'`, `'cuda'`) when debugging which device a tensor lives on.",
    ],
  },
  KV003: {
    title: 'Tensor or backend used after dispose',
    message: '{arg} was disposed and can no longer be used',
    fixes: [
      'Dispose a backend last, after every call on it has finished; to carry on, create a new backend and make its tensors again.',
      'Dispose a tensor only after its last use; create a fresh tensor for the next step instead of reusing a disposed one.',
      'Keep reusable buffers alive for the whole loop and dispose them once, after it ends.',
      'When you keep tensors in a cache, remove the entry before disposing it.',
      'Check `t.disposed` while debugging to find where the tensor was freed.',
    ],
  },
  KV004: {
    title: 'Unsupported dtype',
    message: '{arg} has dtype {actual}; expected one of {expected}',
    fixes: [
      "Create index tensors as `'i32'` or `'i64'`: `backend.tensor('i32', [T], positions)`.",
      "Use kvkit's dtype names exactly: `'f32'`, `'f16'`, `'bf16'`, `'i32'`, `'i64'`, and for KV pools `'fp8e4m3'`, `'fp8e5m2'`.",
      'Keep `eps` as an `f32` tensor `[L]` (or pass a number to `createKvMaterializer`).',
      'Dequantize integer weights before uploading them as `f16`/`bf16`/`f32`.',
    ],
  },
  KV005: {
    title: 'Dtypes that must agree do not',
    message: '{arg} has dtype {actual}; expected {expected} to match {other}',
    fixes: [
      "Convert the odd tensor once, at load time, to the model's dtype (read it and upload it again with the right dtype).",
      'Allocate pools and output buffers with the same dtype as the activations: `backend.empty(kv.dtype, [...])`.',
      'Keep norm weights in `f32` if you are unsure: `kNormWeight` always accepts `f32`.',
      'Pick one serving dtype per model and build every tensor from that one setting.',
    ],
  },
  KV006: {
    title: 'Parameter is not a positive integer',
    message: '{arg} must be a positive integer; got {actual}',
    fixes: [
      'Pass every required parameter explicitly, as a number: `numKvHeads: 2, headDim: 8, rotaryDim: 8`.',
      "Take `headDim` from the model config's `head_dim` when it exists, not from `hidden / heads`.",
      'Fall back to `num_attention_heads` when `num_key_value_heads` is absent (MHA models).',
      'Convert config strings with `Number(...)` and check `Number.isInteger` at load time.',
    ],
  },
  KV007: {
    title: 'Invalid rotary dim for the head dim',
    message: 'rotaryDim must be even and in (0, headDim]; got rotaryDim={actual}, headDim={expected}',
    fixes: [
      "Use the draft model's own rotary dim: `rotaryDim = headDim` for full rotary, `headDim * partial_rotary_factor` for partial rotary (it must come out even).",
      'Omit `rotaryDim` in `createKvMaterializer` and `ropePoolFused` when the whole head is rotated; it defaults to `headDim`.',
      'Check that your cos/sin cache is `[P, rotaryDim]` for the same value.',
    ],
  },
  KV008: {
    title: 'Number out of range',
    message: '{arg} must be a finite number {constraint}; got {actual}',
    fixes: [
      "Pass the model's RoPE base explicitly, e.g. `ropeBase: 10000` (Llama 2), `500000` (Llama 3), `1000000` (Qwen2).",
      "Validate configs when loading them and fall back to the architecture's documented default instead of 0.",
      "Use the model's `rms_norm_eps` for `eps` (typically `1e-6` or `1e-5`).",
    ],
  },
  KV009: {
    title: 'Unknown option value',
    message: '{arg} must be one of {expected}; got {actual}',
    raisedBy: ['measureCopyAt'],
    fixes: [
      "Use `'neox'` when the model's RoPE rotates the two halves of the head (`is_neox_style = true`, `rotate_half`), which is the Hugging Face default.",
      "Use `'gptj'` when pairs are adjacent elements (`is_neox_style = false`, interleaved RoPE).",
      "Map a boolean flag explicitly: `ropeStyle: isNeoxStyle ? 'neox' : 'gptj'`.",
    ],
  },
});

/** Codes of tensor creation and of calls as a whole. */
export const tensorErrors = errors({
  KV040: {
    title: 'Invalid tensor shape',
    message: 'shape {actual} is invalid: every dim must be a non-negative integer',
    fixes: [
      'Compute every dim explicitly, e.g. `[T, H, D]` with `T = data.length / (H * D)`, and check it is an integer.',
      'Take `headDim` from the model config rather than dividing.',
      'Always pass the shape as an array, `[4]` for a 1-D tensor.',
    ],
  },
  KV041: {
    title: 'Data length does not match the shape',
    message: 'data has {actual} elements; shape {shape} holds {expected}',
    fixes: [
      'Derive the shape from the data you have, or the data from the shape, in one place.',
      "For stacked weights, concatenate every layer's values: `L * D` numbers for `[L, D]`.",
      'Check the element size when reading binary weights (`f16` files hold 2 bytes per value).',
    ],
  },
  KV042: {
    title: 'Data not representable in the dtype',
    message: 'data[{index}] = {actual} is not representable as {expected}',
    fixes: [
      'Round index math explicitly: `Math.floor(token / pageSize)`.',
      'Use `i64` (with bigints above `2^53`) for values that do not fit in `i32`.',
      'Convert strings with `Number(...)` and check `Number.isInteger` before uploading.',
    ],
  },
  KV043: {
    title: 'Unknown argument',
    message: '{arg} is not an argument of {op}; expected one of {expected}',
    fixes: [
      'Use the exact camelCase names from the API; the message lists every valid name for the call.',
      'Pick the fields you need from a config instead of spreading the whole object into the call.',
      'Let TypeScript check the call: the typed signatures reject unknown names at compile time.',
    ],
  },
  KV044: {
    title: 'Argument of the wrong kind',
    message: '{arg} must be {expected}; got {actual}',
    raisedBy: ['createCudaBackend', 'streamOf', 'wrapDeviceMemory', 'wrap', 'cudaBackendInfo', 'webGpuBackendStats', 'cpuBackendStats', 'timeOnDevice', 'measureCopyCeilings', 'measureCopyAt', 'measureFmaCeiling', 'timeProjectionGemm'],
    fixes: [
      'Pass a function: `m.materialize({ ctxHidden, positions, writeLayerKv: (layer, k, v) => { ... } })`, and do the per-layer work inside it.',
      'To write every layer straight into `[L, S, H, D]` pools, use `m.materializeInto({ ctxHidden, positions, kPool, vPool, slots })`, which needs no callback.',
      'If you need the data on the host, start `backend.read(k)` inside the callback and await the promises afterwards: `writeLayerKv` must be synchronous, so an `async` one is refused.',
      "Give `backend.tensorFromBits` the typed array the dtype's bits are stored in: a `Uint8Array` for `fp8e4m3` and `fp8e5m2`, a `Uint16Array` for `f16` and `bf16`, a `Uint32Array` (or `Float32Array`) for `f32`, an `Int32Array` or `BigInt64Array` for the index dtypes. Values go to `backend.tensor` instead.",
      'Pass an op\'s arguments as one object named as the message lists them.',
      "For CUDA's `wrapDeviceMemory` and `createCudaBackend({ stream })`: pass the `CUdeviceptr` or `CUstream` as a bigint, with memory from the backend's device and context (`streamOf(backend)`'s), its allocation holding the whole shape from that address.",
    ],
  },
  KV045: {
    title: 'Tensor too large',
    message: '{dtype} tensor of shape {actual} ({count} elements) is more than {backend} holds in one: at most {expected} elements ({reason})',
    fixes: [
      'Split the pool: one `[S, H, D]` tensor per layer for `ropePoolFused`, or fewer slots per `[L, S, H, D]` pool for `materializeInto`, each within the limit the message names.',
      "On WebGPU, ask for a device with larger limits (`requiredLimits: { maxStorageBufferBindingSize, maxBufferSize }` up to what the adapter offers) and pass it to `createWebGpuBackend`; for pools the size of a serving engine's, use the CUDA backend.",
      'Check how each dim of the shape is computed; print the shape before the call, and size caches from the real maximum (slots in use), not from a sentinel.',
      'Read a GPU tensor of more than 2^32 elements in views of it: `backend.read(backend.view(pool, [rows, H, D], { offset }))`.',
    ],
  },
});

/** Codes of strided views and of tensors over memory the application owns. */
export const viewErrors = errors({
  KV029: {
    title: 'Fused qkv is not [N, (Hq + 2H)·D]',
    message: '{arg} has shape {actual}; expected {expected}, the query heads then the key heads then the value heads of each token',
    fixes: [
      'Pass the head counts and head dim of the projection that produced the tensor: `numQoHeads` query heads, `numKvHeads` key heads (and as many value heads), `headDim` each.',
      'Under tensor parallelism, pass the per-rank head counts: each rank holds its own slice of the fused projection.',
      'A projection laid out as `[N, Hq + 2H, D]` is accepted as it is; any other layout (K and V heads interleaved, a batch axis in front) needs `backend.view` with its own strides.',
    ],
  },
  KV046: {
    title: 'Invalid view layout',
    message: '{arg} is invalid: {reason}; got {actual}',
    raisedBy: ['wrap', 'wrapDeviceMemory'],
    fixes: [
      'Give one stride per dim of the shape, in elements (not bytes), as PyTorch counts them: `[H * D, D, 1]` for a row-major `[N, H, D]`.',
      'Give `offset` in elements from element 0 of the tensor viewed, a non-negative integer.',
      "For `wrap`, give `byteOffset` in bytes, a multiple of the dtype's element size (2 for f16 and bf16, 4 for f32 and i32, 8 for i64).",
    ],
  },
  KV047: {
    title: 'View runs past its buffer',
    message: '{arg} reaches element {actual} of its storage, which holds {expected} elements of {dtype}',
    raisedBy: ['wrap', 'wrapDeviceMemory'],
    fixes: [
      'Check the view: its last element is `offset + Σ (shape[i] - 1) * strides[i]`, and it must lie inside the storage of the tensor viewed.',
      'Offsets and strides of a view are in elements of the storage, from element 0 of the tensor viewed, not from the start of a row.',
      "For `wrap`, make the buffer large enough for `byteOffset` plus the view, or wrap a smaller shape.",
    ],
  },
  KV048: {
    title: 'Tensor written in place is not contiguous',
    message: '{arg} is written in place and must be contiguous (row-major, no gaps); its strides are {actual} for shape {shape}',
    fixes: [
      'Pass outputs and KV pools as tensors of their own, or as contiguous views (`backend.view(base, shape, { strides: rowMajor, offset })`); an offset is fine, gaps are not.',
      'To fill a strided destination, let the op write a contiguous tensor and copy from it with your own kernel.',
      'Inputs may be any view: only the tensors an op writes must be contiguous.',
    ],
  },
  KV049: {
    title: 'GPU buffer not usable by this backend',
    message: '{arg} cannot be used here: {reason}',
    raisedBy: ['wrap', 'read', 'readBits'],
    fixes: [
      'Create the buffer on the device the backend runs on: pass that `GPUDevice` to `createWebGpuBackend({ device })` and allocate from it.',
      'Give the buffer `GPUBufferUsage.STORAGE` for kvkit to compute on it, and `GPUBufferUsage.COPY_SRC` as well to `read` or `readBits` it.',
      'Do not destroy a wrapped buffer while kvkit tensors over it are in use.',
    ],
  },
});

/** Every call a GPU backend runs can meet a lost device or a failing driver call. */
const GPU_CALLS = ['tensor', 'empty', 'tensorFromBits', 'read', 'readBits', 'fusedNormRopeStacked', 'createKvMaterializer', 'KvMaterializer.materialize', 'KvMaterializer.materializeInto', 'ropePoolFused', 'dequantizeKv', 'pagedAttention', 'copySlots', 'sync'] as const;

/** Codes of a GPU backend's runtime rather than of a contract: no device, a lost device, a failing driver call. */
export const deviceErrors = errors({
  KV050: {
    title: 'No WebGPU adapter',
    message: 'no WebGPU adapter is available: {reason}. {fix}',
    raisedBy: ['createWebGpuBackend'],
    fixes: [
      'In a browser: use one that ships WebGPU (current Chrome or Edge; Safari or Firefox where their WebGPU is switched on), check that it is not disabled or blocklisted for this GPU (`chrome://gpu` lists it), and serve the page over HTTPS or from localhost, since WebGPU needs a secure context.',
      'In Node without a GPU, install a software adapter: on Debian, `apt-get install chromium` ships SwiftShader; set `VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json` (kvkit tries that path by itself when no driver is listed).',
      'In Node with a GPU, install its Vulkan driver (for NVIDIA, the driver package that provides `nvidia_icd.json`).',
      'Fall back to the CPU reference backend when this code is thrown, as the example does.',
    ],
  },
  KV051: {
    title: 'WebGPU device lost',
    message: 'the WebGPU device was lost ({reason}); this backend cannot run work any more. {fix}',
    raisedBy: [...GPU_CALLS, 'flush', 'prepare'],
    fixes: [
      'Create a new backend (on a new device) and upload the inputs again; a lost device cannot be revived.',
      'Do not destroy a device you passed to `createWebGpuBackend` while the backend is in use; call `backend.dispose()` first.',
      'If losses recur, look for a driver timeout: very long dispatches on a display GPU can be reset by the operating system.',
    ],
  },
  KV052: {
    title: 'No CUDA device',
    message: 'CUDA is not available: {reason}. {fix}',
    raisedBy: ['createCudaBackend'],
    fixes: [
      'Run on a machine with an NVIDIA GPU and its driver; `nvidia-smi` should list the device.',
      'In containers, start them with GPU access so `libcuda.so.1` is mounted inside.',
      'Catch this code and fall back to the WebGPU or CPU backend, as the example does.',
    ],
  },
  KV053: {
    title: 'CUDA driver call failed',
    message: '{call} failed with {error}: {reason}',
    raisedBy: ['createCudaBackend', ...GPU_CALLS, 'dispose'],
    fixes: [
      'For `CUDA_ERROR_OUT_OF_MEMORY`: allocate fewer or smaller tensors, dispose of the ones no longer needed, or check `nvidia-smi` for other processes using the memory.',
      'For errors that name an unusable context (`CUDA_ERROR_ILLEGAL_ADDRESS`, `CUDA_ERROR_LAUNCH_FAILED`): dispose of the backend and restart the process; the context cannot recover.',
      'For binary or PTX version errors: update the NVIDIA driver.',
    ],
  },
  KV054: {
    title: 'WebGPU device out of memory',
    message: 'the WebGPU device ran out of memory: {reason}. {fix}',
    raisedBy: ['sync'],
    fixes: [
      'Dispose of tensors you no longer need (`t.dispose()`), and reuse pools across steps instead of making new ones.',
      'Size pools from the memory the device really has: fewer slots, or split them by layer.',
      'On a shared GPU, check what else holds memory; in browsers, other tabs count too.',
    ],
  },
  KV055: {
    title: 'WebGPU kernel failed to build',
    message: 'the WebGPU kernel {kernel} did not build on this device; the compiler said: {log}. {fix}',
    raisedBy: ['read', 'readBits', 'fusedNormRopeStacked', 'createKvMaterializer', 'KvMaterializer.materialize', 'KvMaterializer.materializeInto', 'ropePoolFused', 'dequantizeKv', 'pagedAttention', 'copySlots', 'prepare', 'sync'],
    fixes: [
      'Report it to kvkit with the compiler log of the message and `backend.label` (the adapter): the shipped kernels should build on every WebGPU device.',
      'If something between kvkit and the device rewrites shaders (a capture or instrumentation layer, a wrapped device), build without it and try again.',
      'Meanwhile use another WebGPU implementation (a current browser or Dawn), or the CUDA or CPU backend.',
    ],
  },
});

/** Codes `Call.tensor` raises for any tensor argument: not a tensor, another backend's, disposed, a layer view used late. */
export const TENSOR_IDENTITY = ['KV001', 'KV002', 'KV003', 'KV027'] as const;

/** The backend's calls besides the ops, checked in src/runtime/tensors.ts, with the codes each raises. */
export const tensorCalls: readonly CallDecl[] = [
  { name: 'tensor', summary: 'A tensor of the given dtype and shape, from data when given.', raises: ['KV003', 'KV004', 'KV040', 'KV045', 'KV001', 'KV041', 'KV042'] },
  { name: 'empty', summary: 'A tensor of the given dtype and shape, its contents unspecified.', raises: ['KV003', 'KV004', 'KV040', 'KV045'] },
  { name: 'tensorFromBits', summary: 'A tensor of the given dtype and shape holding the given bits as stored, unconverted.', raises: ['KV003', 'KV004', 'KV040', 'KV045', 'KV044', 'KV041'] },
  { name: 'read', summary: 'A copy of the data of a live tensor of this backend.', raises: [...TENSOR_IDENTITY, 'KV045'] },
  { name: 'readBits', summary: 'A copy of the stored bits of a live tensor of this backend, unconverted.', raises: [...TENSOR_IDENTITY, 'KV045'] },
  { name: 'view', summary: 'A view of a tensor\'s storage with its own shape, strides and offset, sharing the storage (no copy).', raises: [...TENSOR_IDENTITY, 'KV040', 'KV045', 'KV043', 'KV044', 'KV046', 'KV047'] },
  { name: 'splitQkv', summary: 'q, k and v as views of one fused qkv projection, [N, (Hq + 2H)·D] or [N, Hq + 2H, D].', raises: [...TENSOR_IDENTITY, 'KV004', 'KV043', 'KV044', 'KV006', 'KV029'] },
  { name: 'sync', summary: 'Waits for the work enqueued so far; rejects with the first error a kernel recorded.', raises: ['KV003'] },
  { name: 'flush', summary: 'Submits the work enqueued so far without waiting, so later work of the application runs after it.', raises: ['KV003'] },
  { name: 'prepare', summary: 'Builds ahead what a call of the op with these arguments will need; rejects with the error that call would throw, or KV044 for an op it does not take.', raises: ['KV003', 'KV044'] },
];
