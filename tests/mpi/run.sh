#!/bin/sh
# Runs a test program under mpirun with the mpi backend (DT_BACKEND=mpi):
#   run.sh NP PROGRAM [ARGS...]
# The ranks meet in a fresh file store; as root mpirun needs --allow-run-as-root.
set -eu
np=$1
shift
store=$(mktemp -u "${TMPDIR:-/tmp}/distc-mpi-XXXXXX")
trap 'rm -f "$store" "$store".*' EXIT
export DT_BACKEND=mpi DT_STORE_FILE="$store"
root=""
[ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
exec_rc=0
pass="-x DT_BACKEND -x DT_STORE_FILE"
[ -n "${DISTC_MPI_BLOCKING_COLLECTIVES:-}" ] && pass="$pass -x DISTC_MPI_BLOCKING_COLLECTIVES"
mpirun $root --oversubscribe --bind-to none $pass -np "$np" "$@" || exec_rc=$?
exit $exec_rc
