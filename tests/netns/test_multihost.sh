#!/bin/sh
# Multi-host tests on fake hosts (hosts.sh): ranks on different hosts find
# each other with no interface configured, and faults between hosts end in
# errors within the timeout, never hangs.
#
#   test_multihost.sh MODE BUILD_DIR
#
# MODE: suite-2x2, suite-3x1, loopback-store, ipv6, slurm, srun, launcher,
# link-cut, store-cut, netem. BUILD_DIR holds distc-run, distc-perf and tests/.
set -u
mode=$1
build=$2
here=$(dirname "$0")
. "$here/hosts.sh"
run="$build/distc-run"
perf="$build/distc-perf"
tests="$build/tests"
out=$(mktemp -d "${TMPDIR:-/tmp}/distc-netns-XXXXXX")
trap 'netns_down; rm -rf "$out"' EXIT
export DISTC_STORE_TOKEN="netns-test-$$"
status=0

fail() {
    echo "FAIL: $*"
    status=1
}

show() {
    for f in "$out"/*.log; do
        echo "---- $(basename "$f")"
        tail -n "${NETNS_TAIL:-25}" "$f"
    done
}

# start_job HOSTS NPROC MASTER LIMIT -- PROGRAM...: starts PROGRAM under
# distc-run on every host (node K on host K, its log nodeK.log, each
# launcher killed after LIMIT s), the store on $port. wait_job waits for
# them; job_failed counts the launchers that did not exit 0. job does both.
start_job() {
    hosts=$1 nproc=$2 master=$3 limit=$4
    shift 5
    port=$(netns_port)
    job_pids=""
    for k in $(seq 0 $((hosts - 1))); do
        netns_exec "$k" timeout "$limit" "$run" -n "$nproc" --nnodes "$hosts" --node-rank "$k" \
            --master-addr "$master" --master-port "$port" "$@" >"$out/node$k.log" 2>&1 &
        job_pids="$job_pids $!"
    done
}

wait_job() {
    job_failed=0
    k=0
    for p in $job_pids; do
        wait "$p" || { echo "node $k exited with $?"; job_failed=$((job_failed + 1)); }
        k=$((k + 1))
    done
}

job() {
    start_job "$@"
    wait_job
}

# Waits until FILE has COUNT lines matching PATTERN (false after SECONDS).
await() {
    n=0
    while [ "$(cat "$@" 2>/dev/null | grep -c "$READY_PATTERN")" -lt "$READY_COUNT" ]; do
        n=$((n + 1))
        [ $n -gt 300 ] && return 1
        sleep 0.1
    done
}

# Every rank's "FAILED after MS ms" line in the logs (not the launchers'
# repeats of them) says MS <= LIMIT, and each log given has one at least:
# a launcher stops its other ranks once one has failed, so not all may say it.
failures_within() {
    limit=$1
    shift
    for f in "$@"; do
        grep -q '^\(\[[0-9]*\] \)\{0,1\}FAILED after' "$f" || fail "no rank in $(basename "$f") reported a failure"
    done
    for ms in $(cat "$@" | sed -n 's/^\(\[[0-9]*\] \)\{0,1\}FAILED after \([0-9]*\) ms.*/\2/p'); do
        [ "$ms" -le "$limit" ] || fail "a rank took $ms ms to fail (limit $limit)"
    done
}

perf_all="$perf -o all -b 8 -e 1M -f 8 -w 1 -n 3"

# A real Slurm cluster over the hosts: slurmctld on host 0, a slurmd on
# each host (named nodeK), munge for their credentials (its socket is a
# file, so one munged serves every namespace). Skips where Slurm is not
# installed. slurmd enters its host's network namespace only, keeping the
# machine's mounts (it wants /sys/fs/cgroup), with the host's /etc/hosts.
slurm_up() {
    for t in munged slurmctld slurmd srun sinfo; do
        command -v "$t" >/dev/null || netns_skip "no $t (Debian's munge, slurmctld, slurmd, slurm-client)"
    done
    command -v nsenter >/dev/null && command -v unshare >/dev/null || netns_skip "no nsenter or unshare"
    sl="$out/slurm"
    mkdir -p "$sl/state"
    dd if=/dev/urandom of="$sl/munge.key" bs=1024 count=1 2>/dev/null
    chmod 400 "$sl/munge.key"
    ip netns exec "$(netns_switch)" munged -F --force --key-file "$sl/munge.key" --socket "$sl/munge.sock" \
        --pid-file "$sl/munged.pid" --log-file "$sl/munged.log" --seed-file "$sl/munge.seed" 2>>"$out/munged.log" &
    base=$(netns_port)
    {
        echo "ClusterName=distc"
        echo "SlurmctldHost=$(hostname -s)($(netns_addr 0))"
        echo "SlurmctldPort=$((base + 1))"
        echo "SlurmdPort=$((base + 2))"
        echo "SlurmUser=root"
        echo "AuthType=auth/munge"
        echo "AuthInfo=socket=$sl/munge.sock"
        echo "CredType=cred/munge"
        echo "StateSaveLocation=$sl/state"
        echo "SlurmdSpoolDir=$sl/spool-%n"
        echo "SlurmctldPidFile=$sl/slurmctld.pid"
        echo "SlurmdPidFile=$sl/slurmd-%n.pid"
        echo "SlurmctldLogFile=$sl/slurmctld.log"
        echo "SlurmdLogFile=$sl/slurmd-%n.log"
        echo "SlurmdParameters=config_overrides"
        echo "ProctrackType=proctrack/pgid"
        echo "TaskPlugin=task/none"
        echo "SelectType=select/cons_tres"
        echo "MpiDefault=none"
        echo "ReturnToService=2"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
        for k in $(seq 0 $((NETNS_N - 1))); do
            echo "NodeName=node$k NodeAddr=$(netns_addr "$k") CPUs=2 State=UNKNOWN"
        done
        echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE"
    } >"$sl/slurm.conf"
    # PMIx (srun --mpi=pmix) makes its directories under this base, named
    # alike on every node: each host's slurmd sees a folder of its own there.
    mkdir -p "$sl/pmix"
    echo "PMIxCliTmpDirBase=$sl/pmix" >"$sl/mpi.conf"
    export SLURM_CONF="$sl/slurm.conf"
    n=0
    until [ -S "$sl/munge.sock" ]; do
        n=$((n + 1))
        [ $n -gt 100 ] && { cat "$out/munged.log"; fail "munged did not start"; exit 1; }
        sleep 0.1
    done
    netns_exec 0 slurmctld -D -i -f "$SLURM_CONF" >"$out/slurmctld.log" 2>&1 &
    for k in $(seq 0 $((NETNS_N - 1))); do
        mkdir -p "$sl/spool-node$k" "$sl/pmix-node$k"
        nsenter --net="/run/netns/$(netns_name "$k")" unshare -m sh -c \
            "mount --bind /etc/netns/$(netns_name "$k")/hosts /etc/hosts && mount --bind $sl/pmix-node$k $sl/pmix &&
             exec slurmd -D -N node$k -f $SLURM_CONF" >"$out/slurmd$k.log" 2>&1 &
    done
    n=0
    until [ "$(netns_exec 0 sinfo -h -o %T 2>/dev/null | sort -u)" = idle ]; do
        n=$((n + 1))
        [ $n -gt 300 ] && { show; fail "the Slurm nodes never came up idle"; exit 1; }
        sleep 0.1
    done
}

# srun ARGS...: srun on host 0, with no MASTER_ADDR or MASTER_PORT.
srun_job() { netns_exec 0 env -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE timeout 180 srun "$@"; }

case "$mode" in
suite-2x2 | suite-3x1)
    if [ "$mode" = suite-2x2 ]; then h=2 n=2; else h=3 n=1; fi
    netns_up "$h"
    export DT_RANKS_AS=launched
    for prog in "$tests/test_pg_collectives" "$tests/test_pg_p2p" "$tests/test_pg_groups" \
        "$tests/test_reducer_training" "$perf_all"; do
        job "$h" "$n" "$(netns_addr 0)" 300 -- $prog
        [ $job_failed -eq 0 ] || fail "$prog: $job_failed launcher(s) failed"
        grep -q "FAILED\|Connection refused" "$out"/*.log && fail "$prog: a rank failed"
        [ "$prog" = "$perf_all" ] && ! grep -q "OK: all results correct" "$out/node0.log" && fail "distc-perf found wrong results"
        [ $status -ne 0 ] && show && exit 1
        echo "ok: $(basename "${prog%% *}") on $h hosts x $n rank(s)"
    done
    ;;
loopback-store)
    # Host 0's ranks reach the store through 127.0.0.1, host 1's through
    # host 0's address: host 0 must still advertise an address host 1 reaches.
    netns_up 2
    port=$(netns_port)
    netns_exec 0 timeout 120 "$run" -n 2 --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port "$port" \
        $perf_all >"$out/node0.log" 2>&1 &
    a=$!
    netns_exec 1 timeout 120 "$run" -n 2 --nnodes 2 --node-rank 1 --master-addr "$(netns_addr 0)" \
        --master-port "$port" $perf_all >"$out/node1.log" 2>&1 &
    b=$!
    wait $a || fail "node 0 exited with $?"
    wait $b || fail "node 1 exited with $?"
    grep -q "OK: all results correct" "$out/node0.log" || fail "distc-perf found wrong results"
    ;;
ipv6)
    netns_up 2
    netns_exec 0 ip -6 addr show dev eth0 | grep -q "$(netns_addr6 0)" || netns_skip "no IPv6 in these namespaces"
    job 2 2 "$(netns_addr6 0)" 120 -- $perf_all
    [ $job_failed -eq 0 ] || fail "$job_failed launcher(s) failed over IPv6"
    grep -q "OK: all results correct" "$out/node0.log" || fail "distc-perf found wrong results over IPv6"
    ;;
srun)
    # srun itself, across two hosts of a real Slurm, 2 ranks each: env://
    # finds the store from Slurm's variables alone. Every collective checked,
    # the collective suite, backend mpi with env://, and a rank that hangs:
    # the others fail within the timeout and srun ends the job.
    netns_up 2
    slurm_up
    srun_job -N 2 -n 4 --ntasks-per-node 2 $perf_all >"$out/perf.log" 2>&1 || fail "srun distc-perf exited with $?"
    grep -q "OK: all results correct" "$out/perf.log" || fail "distc-perf under srun found wrong results"
    grep -q "rank 0 reaches rank 1 by shm, ranks 2-3 by tcp" "$out/perf.log" ||
        fail "rank 0 does not reach its host's rank by shm and the other host's by tcp"
    [ $status -ne 0 ] && show && exit 1
    echo "ok: distc-perf under srun -N 2 -n 4"
    DT_RANKS_AS=launched srun_job -N 2 -n 4 --ntasks-per-node 2 "$tests/test_pg_collectives" >"$out/suite.log" 2>&1 ||
        fail "test_pg_collectives under srun exited with $?"
    grep -q "FAILED\|Connection refused" "$out/suite.log" && fail "a rank of test_pg_collectives failed under srun"
    [ $status -ne 0 ] && show && exit 1
    echo "ok: test_pg_collectives under srun -N 2 -n 4"
    # Backend mpi with env:// (and no URL) takes MPI's world under srun too;
    # gloo with env:// meets through Slurm's variables. Open MPI's shared
    # memory is left out (both fake hosts share one /dev/shm and one host
    # name, so its segments would collide), and so are leak checks (Open
    # MPI leaves its components' memory at exit, as under mpirun with ASan).
    if [ -x "$tests/mpi_env_url" ]; then
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" OMPI_MCA_btl=self,tcp \
            srun_job -N 2 -n 4 --ntasks-per-node 2 --mpi=pmix "$tests/mpi_env_url" >"$out/mpi.log" 2>&1 ||
            fail "mpi_env_url under srun --mpi=pmix exited with $?"
        [ $status -ne 0 ] && show && exit 1
        echo "ok: backend mpi with env:// under srun --mpi=pmix"
    fi
    export FAULT_TIMEOUT_MS=3000
    start=$(date +%s)
    srun_job -N 2 -n 4 --ntasks-per-node 2 --kill-on-bad-exit=1 "$tests/fault_rank" hang >"$out/hang.log" 2>&1 &&
        fail "srun of a hung job exited 0"
    took=$(($(date +%s) - start))
    [ "$(grep -c '^FAILED after' "$out/hang.log")" -eq 3 ] || fail "ranks 0-2 did not all report the hang"
    failures_within 4000 "$out/hang.log"
    [ "$took" -le 30 ] || fail "the hung job took $took s to end"
    ;;
launcher)
    # Rank 3 fails on host 1 while every other rank sleeps, in no collective:
    # both launchers stop their ranks, and host 0's says why.
    netns_up 2
    start=$(date +%s)
    job 2 2 "$(netns_addr 0)" 60 -- sh -c 'if [ "$RANK" = 3 ]; then sleep 1; echo giving up; exit 7; fi; exec sleep 50'
    took=$(($(date +%s) - start))
    [ $job_failed -eq 2 ] || fail "$job_failed launcher(s) failed, expected both although only rank 3 failed"
    grep -q "exited with code 7" "$out/node1.log" || fail "host 1's launcher did not name rank 3's exit"
    grep -q "node 0 stopped its 2 rank(s): rank 3 on node 1 exited with code 7" "$out/node0.log" ||
        fail "host 0's launcher did not say why it stopped"
    [ "$took" -le 20 ] || fail "the job took $took s to stop"
    ;;
link-cut)
    # Host 1's link is cut in the middle of allreduces: every rank, on both
    # sides, fails within the timeout (+1 s), and the job ends.
    netns_up 2
    export FAULT_TIMEOUT_MS=3000
    start_job 2 2 "$(netns_addr 0)" 60 -- "$tests/fault_rank" loop
    READY_PATTERN="READY" READY_COUNT=4 await "$out"/node0.log "$out"/node1.log || {
        show
        fail "the ranks never got going"
        exit 1
    }
    netns_cut 1
    cut=$(date +%s)
    wait_job
    took=$(($(date +%s) - cut))
    failures_within 4000 "$out/node0.log" "$out/node1.log"
    [ "$took" -le 15 ] || fail "the launchers took $took s to end after the cut"
    ;;
store-cut)
    # Host 0 (the store's) is cut off while the job meets: ranks 0-2 are in
    # the rendezvous, rank 3 comes after the cut (and is stopped by its
    # launcher once rank 2 has failed). Every rank gets a clear
    # error, not a hang: within the rendezvous's timeout and the group's
    # (each step has its own) and a second.
    netns_up 2
    export FAULT_TIMEOUT_MS=3000
    start_job 2 2 "$(netns_addr 0)" 60 -- sh -c '[ "$RANK" = 3 ] && sleep 2; exec "$0" rendezvous' "$tests/fault_rank"
    sleep 1
    netns_cut 0
    cut=$(date +%s)
    wait_job
    [ $job_failed -eq 2 ] || fail "$job_failed launcher(s) failed, expected both"
    took=$(($(date +%s) - cut))
    failures_within 7000 "$out/node0.log" "$out/node1.log"
    grep -q "^\[[02]\] FAILED.*did not connect to the group's mesh" "$out"/node*.log ||
        fail "no rank named the ranks that never connected"
    [ "$took" -le 20 ] || fail "the launchers took $took s to end after the cut"
    # A rank that starts while the store's host is still cut off says so.
    netns_exec 1 env RANK=3 WORLD_SIZE=4 MASTER_ADDR="$(netns_addr 0)" MASTER_PORT="$port" \
        TORCHELASTIC_USE_AGENT_STORE=True timeout 60 "$tests/fault_rank" rendezvous >"$out/late.log" 2>&1
    failures_within 4000 "$out/late.log"
    grep -q "FAILED.*cannot reach the store server $(netns_addr 0)" "$out/late.log" ||
        fail "a rank that cannot reach the store does not say so"
    ;;
slurm)
    # As srun starts a job: each rank a process with Slurm's variables and
    # no MASTER_ADDR or MASTER_PORT. env:// takes the node list's first host
    # (node0, which is 127.0.1.1 on host 0 itself, so rank 0's store listens
    # on every interface) and a port from the job id.
    netns_up 2
    pids=""
    for r in 0 1 2 3; do
        netns_exec $((r / 2)) env -u MASTER_ADDR -u MASTER_PORT SLURM_PROCID=$r SLURM_NTASKS=4 \
            SLURM_LOCALID=$((r % 2)) SLURM_JOB_NODELIST="node[0-1]" SLURM_JOB_ID=4242 \
            timeout 120 $perf_all >"$out/rank$r.log" 2>&1 &
        pids="$pids $!"
    done
    failed=0
    for p in $pids; do wait "$p" || failed=$((failed + 1)); done
    [ $failed -eq 0 ] || fail "$failed rank(s) failed"
    grep -q "OK: all results correct" "$out/rank0.log" || fail "distc-perf found wrong results"
    ;;
netem)
    # 1 ms delay and 1% loss on every host's link: slower, still correct.
    # With tc netem where the kernel has it; else through netns_wire, a
    # switch in user space that delays and drops frames the same way (1 ms
    # and 1% each way, as netem on both hosts' links).
    netns_up 2
    via="tc netem"
    if ! netns_shape 0 netem delay 1ms loss 1% || ! netns_shape 1 netem delay 1ms loss 1%; then
        netns_down
        via="netns_wire (this kernel has no tc netem)"
        NETNS_WIRE="--delay-us 1000 --loss 1 --seed $$" NETNS_WIRE_BIN="$tests/netns_wire" \
            NETNS_WIRE_LOG="$out/wire.log" netns_up 2
    fi
    echo "delay and loss by $via"
    netns_exec 0 "$tests/netns_probe" "$(netns_addr 1)" 1.8 >"$out/probe.log" 2>&1 ||
        fail "the link does not delay as asked: $(cat "$out/probe.log")"
    cat "$out/probe.log"
    job 2 2 "$(netns_addr 0)" 300 -- $perf_all
    [ $job_failed -eq 0 ] || fail "$job_failed launcher(s) failed under delay and loss"
    grep -q "OK: all results correct" "$out/node0.log" || fail "distc-perf found wrong results"
    # The wire's count of what it forwarded and lost, printed as it stops.
    for p in $(ip netns pids "$(netns_switch)" 2>/dev/null); do kill -TERM "$p"; done
    sleep 0.2
    [ -f "$out/wire.log" ] && cat "$out/wire.log"
    ;;
*)
    echo "unknown mode $mode"
    exit 2
    ;;
esac
# NETNS_SHOW=1 prints the logs of a passing run too.
if [ $status -ne 0 ] || [ "${NETNS_SHOW:-0}" = 1 ]; then show; fi
exit $status
