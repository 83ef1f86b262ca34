#!/usr/bin/env bash
# The README's main job: install what is missing, build, and run a 4-process
# rendezvous through the TCP store on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh >/dev/null
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)" >/dev/null
exec build/distc-rendezvous-demo -n "${1:-4}"
