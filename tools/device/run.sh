#!/usr/bin/env bash
# On the GPU host, from the project root, after `node tools/device/bundle.mjs`:
# the suites on both GPU backends, the CUDA engine example, the GPU catalog examples, compute-sanitizer
# over the CUDA suites, the peers, the benchmark and host I/O. Logs and results go to $OUT.
set -u
OUT=${OUT:-/tmp/kvkit-device}
mkdir -p "$OUT"
source .device/env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader

# step <name> <seconds> <command...>: runs it with a limit, its output in $OUT/<name>.log.
step() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  echo "== $name: exit $? after $((SECONDS - start)) s"
}
suites() { grep -E "^ℹ (tests|pass|fail|cancelled|skipped)" "$OUT/$1.log" | tr '\n' ' '; echo; grep -E "^\s*✖" "$OUT/$1.log" | sort -u | head -20; }

# The resource suites make 10,000 calls of each op here (fewer on SwiftShader in CI); the property suites run ×10.
step conformance "${CONFORMANCE_S:-300}" env KVKIT_RESOURCE_ITERATIONS="${KVKIT_RESOURCE_ITERATIONS:-10000}" KVKIT_PROPERTY_SCALE="${KVKIT_PROPERTY_SCALE:-10}" node --expose-gc --test-reporter=spec .device/bundle/conformance.mjs cuda webgpu
suites conformance
# Out of memory, Vulkan after CUDA, and an illegal address (which spoils the CUDA context): a process of its own.
step cuda-faults "${FAULTS_S:-240}" node --test-reporter=spec .device/bundle/conformance.mjs cuda-faults
suites cuda-faults
# The README's engine example: kvkit on device memory and a stream the caller made, checked against the CPU.
step external-memory "${EXAMPLE_S:-60}" node .device/bundle/external-memory.mjs
tail -6 "$OUT/external-memory.log"
for backend in cuda webgpu; do
  step "catalog-examples-$backend" "${EXAMPLES_S:-60}" node --test-reporter=spec .device/bundle/catalog-examples.mjs "$backend"
  suites "catalog-examples-$backend"
done
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# initcheck does not see cuBLASLt's stores: with it, every read of the projection it wrote (fused_norm_rope's
# K and V loads) counts as uninitialised, though conformance finds the right values there. So initcheck runs
# every suite on the package GEMM (KVKIT_CUDA_GEMM=kvkit), whose writes it tracks.
for tool in memcheck racecheck initcheck synccheck; do
  gemm=()
  [[ $tool == initcheck ]] && gemm=(KVKIT_CUDA_GEMM=kvkit)
  step "$tool" "${SANITIZER_S:-180}" env "${gemm[@]}" KVKIT_SANITIZER="$tool" KVKIT_RESOURCE_ITERATIONS=200 "$sanitizer" --tool "$tool" --print-limit 20 node --expose-gc --test-reporter=dot .device/bundle/conformance.mjs cuda
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/$tool.log" | tail -2
done
# SGLang's Triton kernel is someone else's code: measured only where a copy was placed in the ignored .peers/.
peer=(); [[ -f .peers/fused_kv_materialize.py ]] && peer=(--sglang .peers/fused_kv_materialize.py)
[[ -f .peers/sglang_decode_attention.py ]] && peer+=(--sglang-decode .peers/sglang_decode_attention.py)
step peers "${PEERS_S:-120}" env PYTHONUNBUFFERED=1 python3 bench/peers/torch_peers.py --out "$OUT/peers.json" "${peer[@]}"
step bench "${BENCH_S:-300}" node .device/bundle/bench.mjs --peers "$OUT/peers.json" --results "$OUT"
# transformers' own LongRoPE, interleaved mRoPE and DeepSeek YaRN numbers: commit the file as packages/contracts/test/fixtures/.
step rope-families "${ROPE_FAMILIES_S:-120}" env OUT="$OUT" sh -c 'python3 bench/peers/rope_oracle_families.py > "$OUT/transformers-rope-families.json"'
tail -c 6000 "$OUT/bench.log"
step host-io "${HOST_IO_S:-240}" node .device/bundle/host-io.mjs --backends cpu,cuda,webgpu
tail -c 5000 "$OUT/host-io.log"
