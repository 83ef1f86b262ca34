#!/bin/sh
# distc-run: the environment, output prefixes, a failing or killed rank,
# forwarded signals, restarts, bad arguments, a real distc job and a PyTorch
# one (env:// unchanged), and the job's store token.
#   test_distc_run.sh DISTC_RUN ALLREDUCE_EXAMPLE [PYTHON]
set -u
unset DISTC_STORE_TOKEN
run=$1
example=$2
python=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/checks.sh"

# 1. The environment, and prefixed output on stdout and stderr.
"$run" -n 3 sh -c 'echo "env $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR $TORCHELASTIC_USE_AGENT_STORE $TORCHELASTIC_RESTART_COUNT port=$MASTER_PORT"; echo "to stderr $RANK" >&2' \
    > "$tmp/out" 2> "$tmp/err"
rc=$?
check "three ranks exit 0" [ $rc -eq 0 ]
for r in 0 1 2; do
    check "rank $r's environment" has "^\[$r\] env $r $r 3 3 0 127.0.0.1 True 0 port=[0-9]" "$tmp/out"
    check "rank $r's stderr prefixed" has "^\[$r\] to stderr $r" "$tmp/err"
done
"$run" -n 2 --no-prefix sh -c 'echo plain $RANK' > "$tmp/out" 2>&1
check "--no-prefix" has "^plain 1" "$tmp/out"

# 2. A failing rank stops the others at once and is named with its last lines.
start=$(date +%s)
"$run" -n 3 --grace-ms 2000 sh -c 'if [ "$RANK" = 1 ]; then echo "about to fail"; exit 7; fi; sleep 30' > "$tmp/out" 2> "$tmp/err"
rc=$?
took=$(( $(date +%s) - start ))
check "a failing rank's code is the job's (7)" [ $rc -eq 7 ]
check "the failure names rank 1 and code 7" has "rank 1 (pid [0-9]*) exited with code 7; stopped the other 2 rank(s)" "$tmp/err"
check "the failure repeats its last output" has "  \[1\] about to fail" "$tmp/err"
check "the others were stopped (not waited for 30 s)" [ "$took" -lt 15 ]

# 3. A rank killed by a signal; a rank that ignores SIGTERM is killed after the grace period.
"$run" -n 2 --grace-ms 300 sh -c 'if [ "$RANK" = 0 ]; then kill -SEGV $$; fi; trap "" TERM; sleep 30' > "$tmp/out" 2> "$tmp/err"
rc=$?
check "a rank killed by SIGSEGV gives 128+11" [ $rc -eq 139 ]
check "the failure names the signal" has "rank 0 (pid [0-9]*) was killed by signal 11" "$tmp/err"

# 4. SIGINT/SIGTERM to distc-run reach every rank, which may clean up.
"$run" -n 2 sh -c 'trap "echo cleaned up $RANK; exit 0" TERM INT; echo ready $RANK; sleep 30 & wait' > "$tmp/out" 2> "$tmp/err" &
pid=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do [ "$(grep -c ready "$tmp/out")" -ge 2 ] && break; sleep 0.3; done
kill -INT $pid
wait $pid
rc=$?
check "Ctrl-C: distc-run exits 130" [ $rc -eq 130 ]
check "Ctrl-C: rank 0 got the signal" has "\[0\] cleaned up 0" "$tmp/out"
check "Ctrl-C: rank 1 got the signal" has "\[1\] cleaned up 1" "$tmp/out"

# 5. Restarts: fail on attempts 0 and 1, succeed on 2.
"$run" -n 2 --max-restarts 3 sh -c 'echo attempt $TORCHELASTIC_RESTART_COUNT; [ "$TORCHELASTIC_RESTART_COUNT" -ge 2 ] || exit 3' > "$tmp/out" 2> "$tmp/err"
rc=$?
check "restarts until it succeeds" [ $rc -eq 0 ]
check "two restarts counted" has "restarting the ranks (restart 2 of 3)" "$tmp/err"
check "the third attempt ran" has "\[1\] attempt 2" "$tmp/out"
"$run" -n 1 --max-restarts 1 sh -c 'exit 4' > "$tmp/out" 2> "$tmp/err"
check "restarts exhausted: the failure's code" [ $? -eq 4 ]

# 6. Bad arguments: usage text and exit 2.
for args in "" "-n 0 true" "-n 2" "--bogus -n 1 true" "-n 2 --nnodes 2 true" "-n 1 --node-rank 3 true"; do
    # shellcheck disable=SC2086
    "$run" $args > "$tmp/out" 2>&1
    rc=$?
    check "bad arguments '$args' exit 2 with usage" sh -c "[ $rc -eq 2 ] && grep -q usage: '$tmp/out'"
done
"$run" -n 1 /nonexistent/program > "$tmp/out" 2>&1
check "a program that cannot run: 127, named" sh -c "[ $? -eq 127 ] && grep -q 'cannot run /nonexistent/program' '$tmp/out'"

# 7. A real distc job (env:// against the launcher's store), four ranks.
"$run" -n 4 "$example" > "$tmp/out" 2>&1
rc=$?
check "distc allreduce job" [ $rc -eq 0 ]
check "every rank's allreduce is correct" [ "$(grep -c 'allreduce of 1024 floats correct' "$tmp/out")" -eq 4 ]

# 8. Two "machines" (two launchers here): node 0 hosts the store on --master-port.
if [ -n "$python" ]; then
    port=$("$python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
    "$run" --nnodes 2 --node-rank 1 --master-port "$port" -n 2 "$example" > "$tmp/node1" 2>&1 &
    node1=$!
    "$run" --nnodes 2 --node-rank 0 --master-port "$port" -n 2 "$example" > "$tmp/node0" 2>&1
    rc0=$?
    wait $node1
    rc1=$?
    check "two nodes of two ranks" [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ]
    check "node 1 ran ranks 2 and 3 of 4" sh -c "grep -q '^\[3\] rank 3 of 4: .* correct' '$tmp/node1' && grep -q '^\[2\] rank 2 of 4' '$tmp/node1'"
    check "two nodes without a token: warned" has "no DISTC_STORE_TOKEN: the store on port $port is open" "$tmp/node0"
    # With the same DISTC_STORE_TOKEN on both nodes, the store requires it.
    DISTC_STORE_TOKEN=shared-secret "$run" --nnodes 2 --node-rank 1 --master-port "$port" -n 2 "$example" > "$tmp/node1" 2>&1 &
    node1=$!
    DISTC_STORE_TOKEN=shared-secret "$run" --nnodes 2 --node-rank 0 --master-port "$port" -n 2 "$example" > "$tmp/node0" 2>&1
    rc0=$?
    wait $node1
    rc1=$?
    check "two nodes sharing a token" [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ]
    check "two nodes sharing a token: no warning" sh -c "! grep -q 'open to anyone' '$tmp/node0'"
fi

# 9. A PyTorch program, unchanged (torch's env:// with the launcher's store).
# PyTorch cannot prove the job's token: admitted with --allow-torch-clients,
# refused without it, and distc-run says how to admit it.
if [ -n "$python" ] && "$python" -c "import torch.distributed" 2>/dev/null; then
    cat > "$tmp/torch_job.py" <<'EOF2'
import datetime, torch, torch.distributed as dist
dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=20))
t = torch.ones(3) * (dist.get_rank() + 1)
dist.all_reduce(t)
print('torch rank', dist.get_rank(), 'of', dist.get_world_size(), 'sum', t.tolist())
dist.destroy_process_group()
EOF2
    "$run" -n 2 --allow-torch-clients "$python" "$tmp/torch_job.py" > "$tmp/out" 2>&1
    rc=$?
    check "a PyTorch gloo job under distc-run --allow-torch-clients" [ $rc -eq 0 ]
    check "PyTorch's allreduce saw both ranks" has "\[1\] torch rank 1 of 2 sum \[3.0, 3.0, 3.0\]" "$tmp/out"
    [ $rc -eq 0 ] || cat "$tmp/out"
    "$run" -n 2 --grace-ms 500 "$python" "$tmp/torch_job.py" > "$tmp/out" 2>&1
    check "a PyTorch job without --allow-torch-clients fails" [ $? -ne 0 ]
    check "distc-run names the refused PyTorch client and the flag" has "PyTorch-protocol client.*--allow-torch-clients" "$tmp/out"
fi

# 10. The job's token: random per job, the same for its ranks, needed to join.
"$run" -n 2 sh -c 'echo "token $DISTC_STORE_TOKEN"' > "$tmp/out" 2>&1
"$run" -n 1 sh -c 'echo "token $DISTC_STORE_TOKEN"' > "$tmp/out2" 2>&1
t0=$(sed -n 's/^\[0\] token //p' "$tmp/out")
t1=$(sed -n 's/^\[1\] token //p' "$tmp/out")
t2=$(sed -n 's/^\[0\] token //p' "$tmp/out2")
check "a 64-hex-digit token for each rank" sh -c "echo '$t0' | grep -qx '[0-9a-f]\{64\}'"
check "the ranks of a job share it" [ "$t0" = "$t1" ]
check "another job has another" [ "$t0" != "$t2" ]
"$run" -n 2 --grace-ms 500 sh -c 'if [ "$RANK" = 1 ]; then DISTC_STORE_TOKEN= exec "$0"; fi; exec "$0"' "$example" > "$tmp/out" 2>&1
check "a rank without the token cannot join" [ $? -ne 0 ]
check "it is told the store requires a token" has "\[1\] .*requires a token (set DISTC_STORE_TOKEN" "$tmp/out"
check "the store names it" has "distc-run: distc store server on port [0-9]*: refused 127.0.0.1:[0-9]*: no token given" "$tmp/out"

# 10. A node that cannot reach node 0's store yet stops at once on SIGTERM
# (its handlers came before the join, which retries for minutes: it once
# ignored the signal until then). The port is free: nothing answers there.
if [ -n "$python" ]; then
    port=$("$python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
    "$run" --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "$port" -n 1 true > "$tmp/join" 2>&1 &
    joiner=$!
    sleep 1
    kill -TERM $joiner
    gone=0
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        kill -0 $joiner 2> /dev/null || { gone=1; break; }
        sleep 0.1
    done
    check "a node still joining stops on SIGTERM" [ $gone -eq 1 ]
    [ $gone -eq 1 ] || kill -KILL $joiner
    wait $joiner 2> /dev/null
fi

# 11. distc-run killed outright (SIGKILL) leaves no rank running: the kernel
# stops them (PR_SET_PDEATHSIG). Each rank is the shell that writes its pid,
# then becomes `sleep`.
"$run" -n 2 sh -c "echo \$\$ > '$tmp/rank.'\$RANK; exec sleep 30" > "$tmp/out" 2>&1 &
launcher=$!
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    [ -s "$tmp/rank.0" ] && [ -s "$tmp/rank.1" ] && break
    sleep 0.1
done
sleep 0.2
kill -KILL $launcher
wait $launcher 2> /dev/null
left=""
for r in 0 1; do
    rp=$(cat "$tmp/rank.$r" 2> /dev/null)
    [ -n "$rp" ] || { left="$left (rank $r never started)"; continue; }
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        kill -0 "$rp" 2> /dev/null || break
        sleep 0.1
    done
    if kill -0 "$rp" 2> /dev/null; then
        left="$left $rp"
        kill -KILL "$rp"
    fi
done
check "a launcher killed by SIGKILL leaves no rank running$left" [ -z "$left" ]

[ $fails -eq 0 ] && echo "PASS" || echo "$fails check(s) failed"
exit $fails
