#!/usr/bin/env bash
# The README's test command: install what is missing, build, run every test;
# then the whole suite again under ASan+UBSan, the multi-threaded suites under
# TSan, and every fuzzer for a bounded time. DISTC_SANITIZERS=0 stops after
# the plain suite (a quick local loop); CI always runs everything.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
ctest --preset default
[ "${DISTC_SANITIZERS:-1}" = 0 ] && exit 0

stamp() { echo "test.sh: $1 took $(( $(date +%s) - $2 )) s"; }
t=$(date +%s)
cmake --preset debug
cmake --build --preset debug -j "$(nproc)"
ctest --preset debug -j "$(nproc)"
stamp "ASan+UBSan (build and whole suite)" "$t"

t=$(date +%s)
cmake --preset tsan
cmake --build --preset tsan -j "$(nproc)" --target threaded_tests
ctest --preset tsan -j "$(nproc)"
stamp "TSan (build and threaded suites)" "$t"

t=$(date +%s)
tools/fuzz.sh "${DISTC_FUZZ_SECONDS:-60}"
stamp "fuzzing" "$t"
