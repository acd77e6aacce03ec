#!/usr/bin/env bash
# Everything a fresh machine (Node 20 + npm, root, apt) needs before `pnpm demo` or `pnpm test`:
# pnpm at the pinned version, Debian's chromium (its SwiftShader Vulkan driver gives WebGPU
# without a GPU), and the workspace's packages from the lockfile.
set -euo pipefail
cd "$(dirname "$0")/.."
want=$(node -p "require('./package.json').packageManager.split('@')[1]")
if [[ "$(pnpm --version 2>/dev/null)" != "$want" ]]; then
  npm install -g --silent "pnpm@$want"
fi
if { [[ ! -f /usr/lib/chromium/vk_swiftshader_icd.json ]] || ! ldconfig -p | grep -q libvulkan.so.1; } && command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
  echo "setup: installing Debian's chromium (SwiftShader for WebGPU without a GPU)..."
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium libvulkan1 >/dev/null
fi
pnpm install --frozen-lockfile --reporter=silent
echo "setup: pnpm $(pnpm --version), node $(node --version)$([[ -f /usr/lib/chromium/vk_swiftshader_icd.json ]] && echo ', SwiftShader present')"
