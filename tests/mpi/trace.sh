#!/bin/sh
# The flight recorder over the mpi backend (mpi_trace.c), both ways a
# blocking collective can time out there:
#   trace.sh PROGRAM PYTHON DISTC-TRACE
# Each time every rank leaves a trace and distc-trace names rank 1 and #3.
set -u
prog=$1 py=$2 tool=$3
root=""
[ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
dir=$(mktemp -d "${TMPDIR:-/tmp}/distc-mpi-trace-XXXXXX")
trap 'rm -rf "$dir"' EXIT
for mode in interruptible abort; do
  rm -f "$dir"/*
  extra=""
  [ $mode = interruptible ] && extra="-x DISTC_MPI_BLOCKING_COLLECTIVES=interruptible"
  out=$(DISTC_TRACE_DIR="$dir" mpirun $root --oversubscribe --bind-to none -x DISTC_TRACE_DIR $extra \
    -np 3 "$prog" 2>&1)
  rc=$?
  echo "$out"
  [ $rc -ne 0 ] || { echo "FAIL ($mode): the job exited 0"; exit 1; }
  n=$(ls "$dir" | grep -c '\.jsonl$')
  # Interruptible, both waiting ranks dump; aborting, at least the one whose
  # watchdog ends the job does (the end may take the other first).
  want=3
  [ $mode = abort ] && want=2
  [ "$n" -ge $want ] || { echo "FAIL ($mode): $n trace file(s), expected at least $want"; ls -l "$dir"; exit 1; }
  report=$("$py" "$tool" "$dir" 2>&1)
  echo "$report"
  echo "$report" | grep -q "rank 1 never called allreduce #3 of group" ||
    { echo "FAIL ($mode): distc-trace did not name rank 1 and #3"; exit 1; }
done
echo "PASS"
