#!/bin/sh
# distc-perf: -c finds every result right for every collective, dtype and op
# on 1 to 4 ranks, and finds a spoiled one; busbw factors are nccl-tests';
# --json and --csv; bad arguments.
#   test_distc_perf.sh DISTC_RUN DISTC_PERF [PYTHON]
set -u
run=$1
perf=$2
python=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/checks.sh"

for n in 1 2 3 4; do
    "$run" -n "$n" --no-prefix "$perf" -o all -d all -r all -b 8 -e 4K -f 16 -n 2 -w 1 > "$tmp/out" 2>&1
    rc=$?
    check "$n ranks: every collective, dtype and op correct" sh -c "[ $rc -eq 0 ] && grep -q '^# OK: all results correct, 9 collective(s), [0-9]* rows' '$tmp/out'"
    [ $rc -eq 0 ] || tail -20 "$tmp/out"
done

# The check is real: a spoiled element is counted and fails the run.
"$run" -n 2 --no-prefix "$perf" -o allreduce -b 64 -e 64 --corrupt-for-test > "$tmp/out" 2>&1
rc=$?
check "a spoiled result is counted in #wrong" sh -c "[ $rc -ne 0 ] && grep -q '^# FAILED: 1 wrong results in 1 rows' '$tmp/out'"

# With the check off every row still has a time (it once read 0.00).
"$run" -n 2 --no-prefix "$perf" -o allreduce -b 64 -e 256 -f 2 -n 3 -w 1 -c 0 --csv > "$tmp/csv0" 2>&1
check "-c 0: every row timed" sh -c "[ \$(awk -F, '/^allreduce,/ && \$11 > 0' '$tmp/csv0' | wc -l) -eq 3 ]"
# ... and nothing is counted as wrong that was never checked (it once read
# stack garbage there and failed the run).
"$run" -n 2 --no-prefix "$perf" -o sendrecv -b 8 -e 64K -f 8 -n 3 -w 1 -c 0 > "$tmp/nc" 2>&1
rc=$?
check "-c 0: N/A in #wrong, exit 0" sh -c "[ $rc -eq 0 ] && [ \$(grep -c ' N/A ' '$tmp/nc') -eq 5 ] && grep -q '^# DONE (results not checked)' '$tmp/nc'"

# busbw factors, as nccl-tests' doc/PERFORMANCE.md defines them.
for n in 2 3 4 8; do
    WORLD_SIZE=$n "$perf" --busbw-factors > "$tmp/f"
    ok=1
    while read -r op f; do
        case $op in
            allreduce) want=$(awk "BEGIN { printf \"%.6f\", 2 * ($n - 1) / $n }") ;;
            allgather|reducescatter|alltoall|gather|scatter) want=$(awk "BEGIN { printf \"%.6f\", ($n - 1) / $n }") ;;
            *) want=1.000000 ;;
        esac
        [ "$f" = "$want" ] || { echo "  $op on $n ranks: $f, want $want"; ok=0; }
    done < "$tmp/f"
    check "busbw factors for $n ranks" [ $ok -eq 1 ]
done

# Past 64 ranks (the list forms' tensors are on the heap): gather and scatter checked at 66.
"$run" -n 66 --no-prefix "$perf" -o gather -b 66K -e 66K -n 1 -w 0 > "$tmp/big" 2>&1
"$run" -n 66 --no-prefix "$perf" -o scatter -b 66K -e 66K -n 1 -w 0 >> "$tmp/big" 2>&1
check "66 ranks: gather and scatter correct" sh -c "[ \$(grep -c 'OK: all results correct' '$tmp/big') -eq 2 ]"

# Machine-readable forms.
"$run" -n 2 --no-prefix "$perf" -o allgather -b 64 -e 1K -f 4 -n 2 -w 1 --csv > "$tmp/csv" 2>&1
check "--csv: a header and a row per size" sh -c "head -1 '$tmp/csv' | grep -q '^op,size,count,type' && [ \$(grep -c '^allgather,' '$tmp/csv') -eq 3 ]"
"$run" -n 2 --no-prefix "$perf" -o reducescatter -b 64 -e 1K -f 4 -n 2 -w 1 --json > "$tmp/json" 2>&1
if [ -n "$python" ]; then
    check "--json: one object per row" "$python" -c "
import json, sys
rows = [json.loads(l) for l in open('$tmp/json')]
assert len(rows) == 3 and all(r['op'] == 'reducescatter' and r['oop_wrong'] == 0 and r['ip_wrong'] == 0 for r in rows), rows
assert rows[1]['size'] == 256 and rows[1]['count'] == 32 and rows[1]['ranks'] == 2"
fi

# Bad arguments.
for args in "-o nosuch" "-d complex7" "-r xor" "-b 1K -e 8" "-b 1.5x" "-b -8" "-e 1Q" "-c 2" "-n 0" "--bogus" \
    "-f 2abc" "-n 4294967297" "-w 2147483647" "-c 1x" "--root -1" "-w"; do
    # shellcheck disable=SC2086
    "$perf" $args > "$tmp/out" 2>&1
    rc=$?
    check "bad arguments '$args' exit 2 with usage" sh -c "[ $rc -eq 2 ] && grep -q usage: '$tmp/out'"
done

[ $fails -eq 0 ] && echo "PASS" || echo "$fails check(s) failed"
exit $fails
