#!/usr/bin/env bash
# Builds the libFuzzer targets (the fuzz preset: clang, ASan+UBSan) and runs
# each for SECONDS (default 60; DISTC_FUZZ_SECONDS) from a copy of its
# committed corpus, in parallel as the machine's cores allow. Any crash,
# leak or sanitizer report fails; the reproducer is kept under
# build-fuzz/findings/. Prints each target's executions and rate.
# DISTC_FUZZ_RUNS=N stops each target after N executions instead (SECONDS
# is then only an upper bound).
#   tools/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-${DISTC_FUZZ_SECONDS:-60}}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_store_wire fuzz_mesh_frames fuzz_p2p_frames fuzz_url fuzz_tensor_args)
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target "${targets[@]}" -j "$(nproc)" >/dev/null
out=build-fuzz/findings
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run_one() {
  local t=$1
  mkdir -p "$work/$t"
  cp tests/fuzz/corpus/"$t"/* "$work/$t"/
  local extra=()
  [ -z "${DISTC_FUZZ_RUNS:-}" ] || extra+=(-runs="$DISTC_FUZZ_RUNS")
  # The store server keeps what inputs set across inputs by design, which
  # libFuzzer's per-input leak check would take for a leak and scan for on
  # nearly every input; LeakSanitizer still checks the whole run at exit.
  [ "$t" != fuzz_store_wire ] || extra+=(-detect_leaks=0)
  # Every target runs under libFuzzer's malloc and RSS limits: a peer that
  # announces a huge message before its receive is posted gets memory only
  # as its bytes arrive (p2p_mailbox), so no input needs more.
  build-fuzz/"$t" "$work/$t" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$out/$t-" "${extra[@]}" >"$work/$t.log" 2>&1
}
pids=()
for t in "${targets[@]}"; do
  run_one "$t" & pids+=($!)
  # One target per core at a time.
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do sleep 1; done
done
status=0
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  if wait "${pids[$i]}"; then r=ok; else r=FAILED; status=1; fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$' || echo '?')
  rate=$(grep -o 'exec/s: *[0-9]*' "$work/$t.log" | tail -1 | grep -o '[0-9]*$' || echo '?')
  printf 'fuzz: %-18s %s  %s executions in %ss, %s exec/s\n' "$t" "$r" "$execs" "$secs" "$rate"
  if [ "$r" = FAILED ]; then tail -40 "$work/$t.log"; fi
done
exit $status
