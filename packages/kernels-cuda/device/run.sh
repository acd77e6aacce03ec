#!/usr/bin/env bash
# On the GPU host, from the repository root, after `node packages/kernels-cuda/device/bundle.mjs` here:
# the conformance suites, the benchmark, then memcheck over the cuda suite. Logs go to $OUT.
set -u
OUT=${OUT:-/tmp/kvkit-cuda}
mkdir -p "$OUT"
source .device/env.sh
cd .device/bundle
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"
timeout "${CONFORMANCE_S:-240}" node --test-reporter=spec --test-reporter-destination="$OUT/conformance.log" cuda-conformance.mjs ${SUITE:-} >"$OUT/conformance.out" 2>&1
echo "conformance exit $?"
head -c 2000 "$OUT/conformance.out"
grep -E "^ℹ (tests|suites|pass|fail|cancelled|skipped|duration)" "$OUT/conformance.log"
grep -E "✖" "$OUT/conformance.log" | sort | uniq | head -40
if [ "${BENCH:-1}" = 1 ]; then
  echo "== bench"
  timeout "${BENCH_S:-180}" node cuda-bench.mjs "$OUT/bench.json" >"$OUT/bench.log" 2>&1
  echo "bench exit $?"
  tail -c 5000 "$OUT/bench.log"
fi
if [ "${MEMCHECK:-1}" = 1 ]; then
  echo "== memcheck"
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  timeout "${MEMCHECK_S:-150}" "$sanitizer" --tool memcheck --leak-check no --print-limit 20 node --test-reporter=dot cuda-conformance.mjs "${MEMCHECK_SUITE:-cuda}" >"$OUT/memcheck.log" 2>&1
  echo "memcheck exit $?"
  grep -E "ERROR SUMMARY|Invalid|Program hit|^=========" "$OUT/memcheck.log" | head -40
  tail -c 1500 "$OUT/memcheck.log"
fi
