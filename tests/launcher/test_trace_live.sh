#!/bin/sh
# A live query of a stuck job: 3 ranks under distc-run --trace-dir, the
# last skips an allreduce and sleeps while the others wait in the next one
# (a long timeout: nothing fails by itself). distc-trace --live asks the
# running job for its traces and names the rank; the job keeps running
# until it is stopped.
#   test_trace_live.sh DISTC_RUN FAULT_RANK DISTC_TRACE PYTHON
set -u
run=$1 rank=$2 trace=$3 python=$4
dir=$(mktemp -d)
trap 'kill -TERM $job 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/job.log"; exit 1; }

FAULT_TIMEOUT_MS=120000 "$run" -n 3 --trace-dir "$dir" "$rank" hang >"$dir/job.log" 2>&1 &
job=$!
for _ in $(seq 300); do
    grep -q SKIPPING "$dir/job.log" && break
    sleep 0.1
done
grep -q SKIPPING "$dir/job.log" || fail "the job never got stuck"
sleep 1 # the others are now waiting in the allreduce rank 2 skipped
"$python" "$trace" --live "$job" "$dir" >"$dir/report.txt" 2>&1
status=$?
cat "$dir/report.txt"
[ $status -eq 1 ] || fail "distc-trace exited $status, expected 1 (a divergence)"
grep -q "verdict: rank 2 never called allreduce #3 of group default_pg; ranks 0, 1 waited" "$dir/report.txt" ||
    fail "the verdict does not name rank 2 and allreduce #3"
grep -q "waiting for" "$dir/report.txt" || fail "the waiting ranks are not shown as waiting"
kill -0 $job 2>/dev/null || fail "asking for traces stopped the job"
grep -q "asked node 0's ranks to write their traces" "$dir/job.log" || fail "distc-run did not say it asked"
echo "ok: a live query named the stuck rank"
