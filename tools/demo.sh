#!/usr/bin/env bash
# The README's main job: install what is missing, build, and run a 4-rank job
# with distc-run on this machine: distc-perf runs every collective with the
# default backend (gloo), checks every result, prints nccl-tests' table and
# ends with a one-line verdict.   bash tools/demo.sh [RANKS]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh >/dev/null
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)" >/dev/null
n=${1:-4}
echo "distc-run -n $n distc-perf -o all -b 8 -e 4M -f 8: every collective, gloo backend, every result checked"
exec build/distc-run -n "$n" --no-prefix build/distc-perf -o all -b 8 -e 4M -f 8 -n 100 -w 10
