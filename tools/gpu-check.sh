#!/usr/bin/env bash
# The nccl backend's checks on a lent GPU machine (the `device` tool), which
# has CUDA and NCCL (PyTorch's wheel) but none of Debian's libraries.
#   tools/gpu-check.sh pack BUILD   here: gathers the built plugin, tests, bench
#                                   and the Debian libraries they need into .devcarry/
#   tools/gpu-check.sh run          there (carry .devcarry): GPU tests, then the
#                                   benchmark against plain ncclAllReduce; logs in $OUT
set -uo pipefail
cmd=${1:-}
if [ "$cmd" = pack ]; then
  build=$(cd "$2" && pwd)
  rm -rf .devcarry && mkdir -p .devcarry/lib/distc .devcarry/bin
  grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null || echo '/.devcarry/' >> .git/info/exclude
  cp -L "$build/libdistc.so.0" .devcarry/lib/
  cp "$build/distc/libdistc-nccl.so" .devcarry/lib/distc/
  cp "$build/tests/test_nccl" "$build/distc-nccl-bench" "$build/distc-run" "$build/distc-perf" .devcarry/bin/
  # Debian libraries the GPU machine lacks: Gloo and its dependencies, cmocka.
  for lib in libgloo.so.0 libhiredis.so.0.14 libibverbs.so.1 libnl-route-3.so.200 libnl-3.so.200 libcmocka.so.0; do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')
    [ -n "$path" ] && cp -L "$path" .devcarry/lib/
  done
  du -sh .devcarry
  exit 0
fi
[ "$cmd" = run ] || { echo "usage: $0 pack BUILD | run"; exit 2; }

out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
nvidia-smi -L
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
[ -f "$nccl_dir/libnccl.so.2" ] || nccl_dir=$(dirname "$(find / -name libnccl.so.2 -print -quit 2>/dev/null)")
echo "libnccl from: $nccl_dir"
export LD_LIBRARY_PATH="$PWD/.devcarry/lib:$nccl_dir:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
if ldd .devcarry/lib/distc/libdistc-nccl.so | grep 'not found'; then echo "missing libraries"; fi
status=0
timeout 240 .devcarry/bin/test_nccl 2>&1 | tee "$out/test_nccl.log" || status=1
timeout 150 .devcarry/bin/distc-nccl-bench -b 8 -e 256M -f 4 -n 200 -r 5 2>&1 | tee "$out/nccl_bench.txt" || status=1
timeout 60 .devcarry/bin/distc-nccl-bench -b 8 -e 1M -f 16 -n 200 -r 5 --async 2>&1 | tee "$out/nccl_bench_async.txt" || status=1
timeout 150 .devcarry/bin/distc-nccl-bench -o allgather -b 8 -e 256M -f 4 -n 200 -r 5 2>&1 | tee "$out/nccl_bench_allgather.txt" || status=1
# distc-perf on the nccl backend: every collective, dtype and op checked, then the allreduce table.
timeout 120 .devcarry/bin/distc-run -n 1 --no-prefix .devcarry/bin/distc-perf --backend nccl -o all -d all -r all \
  -b 8 -e 16M -f 16 -n 5 -w 2 2>&1 | tail -3 | tee "$out/distc_perf_nccl_check.txt" || status=1
timeout 120 .devcarry/bin/distc-run -n 1 --no-prefix .devcarry/bin/distc-perf --backend nccl -o allreduce \
  -b 8 -e 256M -f 4 -n 200 -w 20 2>&1 | tee "$out/distc_perf_nccl.txt" || status=1
exit $status
