#!/bin/sh
# A blocking collective that a rank never joins (mpi_blocking_timeout.c):
#   by default the job ends, non-zero, with distc's message naming it;
#   interruptible, rank 0's call returns DISTC_ETIMEOUT (-2) within the timeout.
set -u
prog=$1
root=""
[ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
out=$(mpirun $root --oversubscribe --bind-to none -np 2 "$prog" 2>&1)
rc=$?
echo "$out"
[ $rc -ne 0 ] || { echo "FAIL: the job exited 0"; exit 1; }
echo "$out" | grep -q "allreduce #1 timed out after 500 ms in a blocking MPI call" ||
  { echo "FAIL: no message naming the operation"; exit 1; }
out=$(mpirun $root --oversubscribe --bind-to none -x DISTC_MPI_BLOCKING_COLLECTIVES=interruptible -np 2 "$prog" 2>&1)
echo "$out"
echo "$out" | grep -q "allreduce returned -2: .*timed out after 500 ms" ||
  { echo "FAIL: the interruptible call did not return DISTC_ETIMEOUT"; exit 1; }
echo "PASS"
