import { describe, expect, it } from 'vitest';
import { lookup } from '../src/index.js';

/**
 * Messages as vLLM, SGLang, FlashInfer, PyTorch and transformers print them
 * (their format placeholders filled in the way the library fills them), each
 * with where its text comes from and the code of the same mistake here.
 *
 * `FI`: flashinfer-ai/flashinfer, `VL`: vllm-project/vllm, `SG`:
 * sgl-project/sglang, `PT`: pytorch/pytorch, `HF`: huggingface/transformers.
 * The FlashInfer C++ checks print through TVM-FFI's `TVM_FFI_ICHECK_EQ`:
 * `Check failed: <x> == <y> (<x value> vs. <y value>) : <message>`.
 */
interface Case {
  message: string;
  source: string;
  code: string;
  /** Set where two codes are equally right: then the expected one must be in the top 2, and this one is the other. */
  tiedWith?: string;
}

const cases: Case[] = [
  // FlashInfer
  { message: 'Check failed: q.ndim() == 3 (2 vs. 3) : q must be a 3D tensor', source: 'FI csrc/rope.cu apply_rope_pos_ids, CHECK_DIM(3, q)', code: 'KV030' },
  { message: 'Check failed: positions.ndim() == 1 (2 vs. 1) : positions must be a 1D tensor', source: 'FI csrc/page.cu append_paged_kv_cache, CHECK_DIM(1, positions)', code: 'KV033' },
  { message: 'Check failed: paged_k_cache.ndim() == 4 (3 vs. 4) : paged_k_cache must be a 4D tensor', source: 'FI csrc/page.cu append_paged_kv_cache, CHECK_DIM(4, paged_k_cache)', code: 'KV035' },
  { message: 'Check failed: positions.size(0) == nnz (7 vs. 8) : ', source: 'FI csrc/page.cu append_paged_kv_cache, TVM_FFI_ICHECK_EQ(positions.size(0), nnz)', code: 'KV034' },
  { message: 'Check failed: append_key.size(1) == num_heads (4 vs. 8) : ', source: 'FI csrc/page.cu append_paged_kv_cache, TVM_FFI_ICHECK_EQ(append_key.size(1), num_heads)', code: 'KV036' },
  {
    message: 'Check failed: cos_sin_cache.ndim() == 2 (1 vs. 2) : cos_sin_cache must be a 2D tensor',
    source: 'FI csrc/rope.cu apply_rope_pos_ids_cos_sin_cache, CHECK_DIM(2, cos_sin_cache)',
    code: 'KV016',
  },
  { message: 'Check failed: q.size(0) == k.size(0) (8 vs. 7) : ', source: 'FI csrc/rope.cu apply_rope_pos_ids, TVM_FFI_ICHECK_EQ(q.size(0), k.size(0))', code: 'KV032' },
  {
    message: 'Check failed: paged_k_cache.stride(-1) == 1 (2 vs. 1) : paged_k_cachemust be contiguous at last dimension',
    source: 'FI csrc/page.cu append_paged_kv_cache, CHECK_LAST_DIM_CONTIGUOUS_INPUT(paged_k_cache)',
    code: 'KV048',
  },
  {
    message: 'Check failed: num_qo_heads % num_kv_heads == 0 (2 vs. 0) : num_qo_heads(32) must be divisible by num_kv_heads(6)',
    source: 'FI csrc/single_decode.cu, TVM_FFI_ICHECK_EQ(num_qo_heads % num_kv_heads, 0)',
    code: 'KV037',
  },
  { message: 'num_qo_heads must be a multiple of num_kv_heads, got num_kv_heads: 6 and num_qo_heads: 32', source: 'FI csrc/trtllm_fmha_kernel_launcher.cu', code: 'KV037' },
  { message: "KeyError: 'Invalid kv_layout NDH'", source: 'FI flashinfer/utils.py _check_kv_layout', code: 'KV009' },
  {
    message: 'ValueError: append_key and append_value must have the same dtype, got torch.float16 and torch.bfloat16',
    source: 'FI flashinfer/page.py nvfp4_quantize_append_paged_kv_cache',
    code: 'KV005',
  },
  { message: 'ValueError: append_key must be float16 or bfloat16, got torch.float32', source: 'FI flashinfer/page.py nvfp4_quantize_append_paged_kv_cache', code: 'KV004' },
  { message: 'ValueError: slot_mapping must be int32 or int64, got torch.float32', source: 'FI flashinfer/page.py nvfp4_quantize_append_paged_kv_cache_with_slot_mapping', code: 'KV004' },
  {
    message: 'ValueError: append_key and append_value must have at least slot_mapping.shape[0] rows',
    source: 'FI flashinfer/page.py nvfp4_quantize_append_paged_kv_cache_with_slot_mapping',
    code: 'KV034',
  },
  { message: 'ValueError: GQA/MHA cache must be 4D, got k=3D, v=3D', source: 'FI flashinfer/rope.py rope_quantize_fp8_append_paged_kv_cache', code: 'KV073' },
  {
    message: 'ValueError: GQA/MHA cache dtype mismatch: expected torch.float8_e4m3fn, got k=torch.bfloat16, v=torch.bfloat16',
    source: 'FI flashinfer/rope.py rope_quantize_fp8_append_paged_kv_cache',
    code: 'KV005',
  },
  { message: 'ValueError: cos_sin_cache should be float32', source: 'FI flashinfer/rope.py apply_rope_with_cos_sin_cache', code: 'KV004' },
  {
    message: 'ValueError: The dtype of k torch.float16 does not match the kv_data_type torch.bfloat16 specified in plan function.',
    source: 'FI flashinfer/utils.py _check_cached_qkv_data_type',
    code: 'KV005',
  },
  { message: 'ValueError: Invalid device of out: expected cuda:0, got cpu', source: 'FI flashinfer/utils.py check_shape_dtype_device', code: 'KV002' },
  { message: 'ValueError: k_scale and v_scale must be positive finite global decode scales', source: 'FI flashinfer/page.py nvfp4_quantize_append_paged_kv_cache', code: 'KV019' },
  { message: 'ValueError: scale must be a scalar tensor or shape (1,), got shape (8, 2)', source: 'FI flashinfer/norm/__init__.py _normalize_scale_tensor', code: 'KV072' },
  { message: 'ValueError: kv_cache_sf must be provided for NVFP4 KV cache.', source: 'FI flashinfer/decode.py BatchDecodeWithPagedKVCacheWrapper.run', code: 'KV070' },
  { message: 'ValueError: weight shape mismatch: expected [128], got (4096,)', source: 'FI flashinfer/norm/__init__.py fused_rmsnorm_silu', code: 'KV068' },
  { message: 'ValueError: Expected q_nope_pe.ndim == 3, got 2', source: 'FI flashinfer/mla.py _check_cutlass_shape', code: 'KV092' },
  { message: 'ValueError: Expected ckv_kpe_cache.ndim == 3, got 4', source: 'FI flashinfer/mla.py _check_cutlass_shape', code: 'KV094' },
  { message: 'ValueError: Expected head dim 576 for q_nope_pe and ckv_kpe_cache, got 576 and 512', source: 'FI flashinfer/mla.py _check_cutlass_shape', code: 'KV094' },

  // SGLang
  {
    message: 'ValueError: positions must match ctx_hidden token count for fused KV materialization: positions=7, total_ctx=8.',
    source: 'SG python/sglang/srt/speculative/triton_ops/fused_kv_materialize.py FusedKVMaterializeHelper.materialize',
    code: 'KV023',
  },
  {
    message: 'RuntimeError: RoPE cos/sin cache is too short for fused KV materialization: max_position=40960, cache_len=32768.',
    source: 'SG fused_kv_materialize.py FusedKVMaterializeHelper.materialize',
    code: 'KV017',
  },
  {
    message: 'ValueError: num_kv_heads mismatch across layers for fused KV path: expected 8, got 4 at layer 2.',
    source: 'SG fused_kv_materialize.py FusedKVMaterializeHelper.__init__',
    code: 'KV020',
  },
  { message: 'ValueError: Invalid fused KV rotary/head dim pair: rotary_dim=130, head_dim=128.', source: 'SG fused_kv_materialize.py _fused_norm_rope', code: 'KV007' },
  { message: 'ValueError: Invalid fused KV projection shape: got (8, 2000), expected second dim 2048.', source: 'SG fused_kv_materialize.py _fused_norm_rope', code: 'KV011' },
  { message: 'k_buffer.value() must be a 3D tensor', source: 'SG sgl-kernel/csrc/elementwise/rope.cu apply_rope_pos_ids_cos_sin_cache, CHECK_DIM(3, k_buffer.value())', code: 'KV035' },
  { message: 'kv_cache_loc.value() must be a 1D tensor', source: 'SG sgl-kernel/csrc/elementwise/rope.cu apply_rope_pos_ids_cos_sin_cache, CHECK_DIM(1, kv_cache_loc.value())', code: 'KV033' },
  { message: 'CHECK_EQ(q.size(2), k.size(2)) failed. 128 vs 64', source: 'SG sgl-kernel/csrc/elementwise/rope.cu apply_rope_pos_ids_cos_sin_cache', code: 'KV032' },

  // vLLM
  {
    message: 'RuntimeError: Expected kv_cache.size(2) == kv_lora_rank + pe_dim to be true, but got false.  (Could this error message be improper? If so, please report an enhancement request to PyTorch.)',
    source: 'VL csrc/cache_kernels.cu concat_and_cache_mla, TORCH_CHECK(kv_cache.size(2) == kv_lora_rank + pe_dim)',
    code: 'KV094',
  },
  { message: 'ValueError: Unknown RoPE scaling type su', source: 'VL vllm/model_executor/layers/rotary_embedding/__init__.py get_rope', code: 'KV060' },
  { message: "ValueError: Dynamic rope scaling must contain either 'alpha' or 'factor' field", source: 'VL rotary_embedding/__init__.py get_rope', code: 'KV061' },
  { message: 'ValueError: partial_rotary_factor=1.5 must be between 0.0 and 1.0', source: 'VL rotary_embedding/__init__.py get_rope', code: 'KV007' },
  { message: 'positions must have shape [num_tokens] or [batch_size, seq_len]', source: 'VL csrc/pos_encoding_kernels.cu rotary_embedding', code: 'KV033' },
  { message: 'query, key and positions must have the same number of tokens', source: 'VL csrc/pos_encoding_kernels.cu rotary_embedding', code: 'KV034' },
  {
    message: 'assert sum(self.mrope_section) == rotary_dim // 2\nAssertionError',
    source: 'VL vllm/model_executor/layers/rotary_embedding/mrope.py MRotaryEmbedding.__init__ (the traceback line and the bare AssertionError)',
    code: 'KV065',
  },
  { message: 'assert self.mrope_section\nAssertionError', source: 'VL rotary_embedding/mrope.py MRotaryEmbedding.forward_native', code: 'KV066' },
  { message: 'ValueError: mrope_section must sum to rotary_dim // 2, got [32, 48, 48] and rotary_dim=128', source: 'VL vllm/model_executor/layers/fused_qk_norm_rope.py fused_qk_rmsnorm_rope_gate', code: 'KV065' },
  { message: 'ValueError: MRoPE positions must have shape (3, n_tokens), got torch.Size([2, 8])', source: 'VL vllm/model_executor/layers/fused_qk_norm_rope.py fused_qk_rmsnorm_rope_gate', code: 'KV067' },
  { message: 'ValueError: mrope_section requires 2D MRoPE positions', source: 'VL vllm/model_executor/layers/fused_qk_norm_rope.py fused_qk_rmsnorm_rope_gate', code: 'KV067' },
  { message: 'ValueError: rotary_dim must be a positive even integer <= head_dim, got rotary_dim=130, head_dim=128', source: 'VL vllm/model_executor/layers/fused_qk_norm_rope.py fused_qk_rmsnorm_rope_gate', code: 'KV007' },
  { message: 'ValueError: positions token dimension must match q_gate, got 7 and 8', source: 'VL vllm/model_executor/layers/fused_qk_norm_rope.py fused_qk_rmsnorm_rope_gate', code: 'KV034' },
  { message: 'ValueError: q_gate and k must have the same FP16 or BF16 dtype, got torch.bfloat16 and torch.float16', source: 'VL vllm/model_executor/layers/fused_qk_norm_rope.py fused_qk_rmsnorm_rope_gate', code: 'KV005' },

  // transformers
  {
    message: "KeyError: \"Missing required keys in `rope_scaling` for 'rope_type'='llama3': {'low_freq_factor', 'high_freq_factor'}\"",
    source: 'HF src/transformers/modeling_rope_utils.py _check_received_keys',
    code: 'KV061',
  },
  { message: "Unrecognized keys in `rope_scaling` for 'rope_type'='yarn': {'beta_fst'}", source: 'HF modeling_rope_utils.py _check_received_keys', code: 'KV061' },
  { message: "`rope_scaling`'s factor field must be a float >= 1, got 0.5", source: 'HF modeling_rope_utils.py _validate_linear_scaling_rope_parameters', code: 'KV064' },
  {
    message: "`rope_scaling`'s high_freq_factor field must be greater than low_freq_factor, got high_freq_factor=1.0 and low_freq_factor=4.0",
    source: 'HF modeling_rope_utils.py _validate_llama3_parameters',
    code: 'KV063',
  },
  {
    message: "`rope_scaling`'s beta_fast field must be greater than beta_slow, got beta_fast=1.0 (defaults to 32 if None) and beta_slow=32.0 (defaults to 1 if None)",
    source: 'HF modeling_rope_utils.py _validate_yarn_parameters',
    code: 'KV063',
  },
  { message: "`rope_scaling`'s attention_factor field must be a float greater than 0, got -1.0", source: 'HF modeling_rope_utils.py _validate_yarn_parameters', code: 'KV062' },
  {
    message: "`rope_scaling`'s original_max_position_embeddings field must be an integer, got 8192.5",
    source: 'HF modeling_rope_utils.py _validate_llama3_parameters',
    code: 'KV062',
  },
  { message: "Missing validation function mapping in `ROPE_VALIDATION_FUNCTIONS` for 'rope_type'='su'", source: 'HF modeling_rope_utils.py rope_config_validation', code: 'KV060' },
  { message: "`rope_parameters`'s short_factor field must have length 48, got 64", source: 'HF modeling_rope_utils.py _validate_longrope_rope_parameters', code: 'KV084' },
  { message: "`rope_parameters`'s long_factor field must be a list of numbers, got [1.0, '1.05', 1.1]", source: 'HF modeling_rope_utils.py _validate_longrope_rope_parameters', code: 'KV085' },

  { message: 'ValueError: mrope_section cannot be None.', source: 'VL vllm/model_executor/layers/rotary_embedding/mrope_interleaved.py MRotaryEmbeddingInterleaved.__init__', code: 'KV086' },

  // PyTorch
  // torch.matmul has one signature, so its parser names the argument at fault.
  { message: "TypeError: matmul(): argument 'other' (position 2) must be Tensor, not list", source: 'PT torch/csrc/utils/python_arg_parser.cpp FunctionSignature::parse', code: 'KV001' },
  { message: "TypeError: matmul() got an unexpected keyword argument 'mat2'", source: 'PT torch/csrc/utils/python_arg_parser.cpp extra_kwargs', code: 'KV043' },
  {
    message: 'RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!',
    source: 'PT aten/src/ATen/TensorIterator.cpp compute_types',
    code: 'KV002',
  },
  { message: 'RuntimeError: expected scalar type Float but found BFloat16', source: 'PT aten/src/ATen/templates/TensorMethods.cpp Tensor::data_ptr<T>()', code: 'KV005' },
  { message: 'RuntimeError: Trying to create tensor with negative dimension -1: [-1, 8]', source: 'PT aten/src/ATen/EmptyTensor.h check_size_nonnegative', code: 'KV040' },
  { message: "RuntimeError: shape '[4, 8]' is invalid for input of size 30", source: 'PT aten/src/ATen/InferSize.h infer_size_impl', code: 'KV041' },
  { message: 'RuntimeError: value cannot be converted to type at::Half without overflow', source: 'PT c10/util/TypeCast.cpp report_overflow', code: 'KV042' },
  {
    message:
      'RuntimeError: unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location. Please clone() the tensor before performing the operation.',
    source: 'PT aten/src/ATen/MemoryOverlap.cpp assert_no_partial_overlap',
    code: 'KV039',
  },
  { message: 'AssertionError: Torch not compiled with CUDA enabled', source: 'PT torch/cuda/__init__.py _lazy_init', code: 'KV052' },
  { message: 'IndexError: index out of range in self', source: 'PT aten/src/ATen/native/TensorAdvancedIndexing.cpp index_select_out_cpu_', code: 'KV017' },
  {
    message: 'indexSelectLargeIndex: block: [0,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.',
    source: 'PT aten/src/ATen/native/cuda/Indexing.cu indexSelectLargeIndex',
    code: 'KV017',
  },
  { message: 'IndexError: index 4096 is out of bounds for dimension 0 with size 4096', source: 'PT aten/src/ATen/native/cuda/Indexing.cu wrapIndexOnce', code: 'KV038' },
  {
    message: "RuntimeError: split_with_sizes expects split_sizes to sum exactly to 4096 (input tensor's size at dimension 1), but got split_sizes=[2048, 512, 512]",
    source: 'PT aten/src/ATen/native/TensorShape.cpp split_with_sizes',
    code: 'KV029',
  },
  {
    message: 'RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x2048 and 4096x1024)',
    source: 'PT aten/src/ATen/native/LinearAlgebra.cpp TORCH_META_FUNC(addmm)',
    code: 'KV022',
    // The product fails whichever side is wrong: the hidden states (KV022) or the projection weight (KV020).
    tiedWith: 'KV020',
  },
  { message: 'RuntimeError: Storage size calculation overflowed with sizes=[4294967296, 4294967296]', source: 'PT aten/src/ATen/EmptyTensor.cpp computeStorageNbytesContiguous', code: 'KV045' },
  {
    message: 'RuntimeError: setStorage: sizes [4, 8], strides [8, 1], storage offset 16, and itemsize 4 requiring a storage size of 192 are out of bounds for storage of size 128',
    source: 'PT aten/src/ATen/native/Resize.h checkInBoundsForStorage',
    code: 'KV047',
  },
];

/** The inputs issue 25 measured: a check's condition as code writes it, and the head of vLLM's message. */
const reported: [string, string][] = [
  ['positions.shape[0] != ctx_hidden.shape[0]', 'KV023'],
  ['mrope_section must sum to rotary_dim // 2', 'KV065'],
];

describe('lookup of upstream messages', () => {
  it('has at least 40 real upstream messages, each with its source', () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
    for (const c of cases) expect(c.source).toMatch(/^(FI|VL|SG|PT|HF) \S/);
    expect(cases.filter((c) => c.tiedWith).length).toBeLessThanOrEqual(2);
  });

  it.each(cases.filter((c) => !c.tiedWith).map((c) => [c.message, c.code] as const))('%s ranks %s first', (message, code) => {
    expect(lookup(message)[0]?.entry.code).toBe(code);
  });

  it.each(cases.filter((c) => c.tiedWith).map((c) => [c.message, c.code, c.tiedWith!] as const))('%s ranks %s and %s as the top two', (message, code, other) => {
    const top2 = lookup(message, 2).map((m) => m.entry.code);
    expect(top2).toContain(code);
    expect(top2).toContain(other);
  });

  it.each(reported)('the reported %s ranks %s first', (message, code) => {
    expect(lookup(message)[0]?.entry.code).toBe(code);
  });

  it('does not let a near-empty template take any "X: Y" message', () => {
    // KV063's template is `{arg}: {problem}`; these name nothing it checks.
    for (const text of ['ValueError: something went wrong', 'positions: shape mismatch', 'RuntimeError: CUDA error: an illegal memory access was encountered']) {
      expect(lookup(text)[0]?.entry.code, text).not.toBe('KV063');
    }
  });
});
