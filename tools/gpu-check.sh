#!/usr/bin/env bash
# The nccl backend's checks on a lent GPU machine (the `device` tool), which
# has CUDA and NCCL (PyTorch's wheel) but none of Debian's libraries.
#   tools/gpu-check.sh pack BUILD   here: gathers the built plugin, tests, bench
#                                   and the Debian libraries they need into .devcarry/,
#                                   with Open MPI relocated under .devcarry/ompi
#   tools/gpu-check.sh run          there (carry .devcarry): GPU tests, the benchmark
#                                   against plain ncclAllReduce, then (the lent machine
#                                   has many cores) bench/compare across two fake hosts
#                                   (GPU_CHECK_HOSTS=0: not) and of shared memory
#                                   against Open MPI without oversubscription; logs in $OUT
set -uo pipefail
cmd=${1:-}
if [ "$cmd" = pack ]; then
  set -e  # a piece missing here would only show there
  build=$(cd "$2" && pwd)
  rm -rf .devcarry && mkdir -p .devcarry/lib/distc .devcarry/bin .devcarry/build/distc
  mkdir -p .git/info
  grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null || echo '/.devcarry/' >> .git/info/exclude
  objcopy --strip-debug "$(readlink -f "$build/libdistc.so.0")" .devcarry/lib/libdistc.so.0
  cp "$build/distc/libdistc-nccl.so" .devcarry/lib/distc/
  cp "$build/tests/test_nccl" "$build/distc-nccl-bench" "$build/distc-run" "$build/distc-perf" .devcarry/bin/
  # bench/compare's and bench/ab's build directory: the distc and plain-MPI benchmarks, the launcher and the mpi plugin.
  cp "$build/distc-pg-bench" "$build/mpi-raw-bench" "$build/distc-run" "$build/distc-line-trip" .devcarry/build/
  cp "$build/distc/libdistc-mpi.so" .devcarry/build/distc/
  # Debian libraries the GPU machine lacks: Gloo, Open MPI, PMIx and their dependencies, cmocka.
  for lib in libgloo.so.0 libhiredis.so.0.14 libibverbs.so.1 libnl-route-3.so.200 libnl-3.so.200 libcmocka.so.0 \
             libmpi.so.40 libopen-rte.so.40 libopen-pal.so.40 libpmix.so.2 libmunge.so.2 libhwloc.so.15 \
             libevent_core-2.1.so.7 libevent_pthreads-2.1.so.7 libudev.so.1 libz.so.1; do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l && !found { print $NF; found = 1 }')
    [ -n "$path" ] || { echo "gpu-check: $lib not found (tools/install-deps.sh)"; exit 1; }
    cp -L "$path" .devcarry/lib/
  done
  # Open MPI's launcher, components, help texts and settings, found there through
  # OPAL_PREFIX and friends (see run); its common libraries join lib/.
  ompi=/usr/lib/x86_64-linux-gnu/openmpi
  mkdir -p .devcarry/ompi/bin .devcarry/ompi/etc
  cp -L /usr/bin/orterun .devcarry/ompi/bin/mpirun
  cp -r "$ompi/lib/openmpi3" .devcarry/ompi/pkglib
  cp -L "$ompi"/lib/libmca_common_*.so* .devcarry/lib/
  cp -r /usr/share/openmpi .devcarry/ompi/share
  cp /etc/openmpi/openmpi-mca-params.conf .devcarry/ompi/etc/
  # PMIx's components and help texts, found there through PMIX_PREFIX and friends.
  pmix=/usr/lib/x86_64-linux-gnu/pmix2
  mkdir -p .devcarry/pmix/lib .devcarry/pmix/share
  cp -r "$pmix/lib/pmix" .devcarry/pmix/lib/
  cp -r "$pmix/share/pmix" .devcarry/pmix/share/
  # ip, tc and iperf3 for bench/compare --hosts, with their libraries, each
  # run through the loader with those (ip netns exec's commands must not
  # inherit them); and gloo-raw-bench, raw Gloo's side of that table.
  mkdir -p .devcarry/net/bin .devcarry/net/lib .devcarry/net/wrap
  for b in /usr/sbin/ip /usr/sbin/tc /usr/bin/iperf3; do
    [ -x "$b" ] || { echo "gpu-check: $b not found (tools/install-deps.sh)"; exit 1; }
    cp -L "$b" .devcarry/net/bin/
    for l in $(ldd "$b" | awk '$3 ~ /^\// { print $3 }'); do
      case "$l" in */libc.so.6 | */libm.so.6) ;; *) cp -L "$l" .devcarry/net/lib/ ;; esac
    done
    printf '#!/bin/sh\nd=$(cd "$(dirname "$0")/.." && pwd)\nexec /lib64/ld-linux-x86-64.so.2 --library-path "$d/lib" "$d/bin/%s" "$@"\n' \
      "$(basename "$b")" > ".devcarry/net/wrap/$(basename "$b")"
    chmod +x ".devcarry/net/wrap/$(basename "$b")"
  done
  cp "$build/gloo-raw-bench" .devcarry/build/
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
# Logs go to few files: the device brings back only a handful. Each stage has
# its own limit; the shared-memory stage takes what is left of $GPU_CHECK_S
# seconds from the start (below the device's per-command limit).
timeout 150 .devcarry/bin/test_nccl 2>&1 | tee "$out/test_nccl.log" || status=1
# distc-perf on the nccl backend: every collective, dtype and op checked, then the allreduce table.
timeout 60 .devcarry/bin/distc-run -n 1 --no-prefix .devcarry/bin/distc-perf --backend nccl -o all -d all -r all \
  -b 8 -e 16M -f 16 -n 5 -w 2 2>&1 | tail -3 | tee "$out/distc_perf_nccl.txt" || status=1
timeout 45 .devcarry/bin/distc-nccl-bench -b 8 -e 256M -f 4 -n 200 -r 5 2>&1 | tee "$out/nccl_bench.txt" || status=1
timeout 30 .devcarry/bin/distc-nccl-bench -b 8 -e 1M -f 16 -n 200 -r 5 --async 2>&1 | tee -a "$out/nccl_bench.txt" || status=1
timeout 45 .devcarry/bin/distc-nccl-bench -o allgather -b 8 -e 256M -f 4 -n 200 -r 5 2>&1 | tee -a "$out/nccl_bench.txt" || status=1
timeout 45 .devcarry/bin/distc-run -n 1 --no-prefix .devcarry/bin/distc-perf --backend nccl -o allreduce \
  -b 8 -e 256M -f 4 -n 200 -w 20 2>&1 | tee -a "$out/distc_perf_nccl.txt" || status=1
echo "# nccl stages took $SECONDS s"
[ "${GPU_CHECK_SHM:-1}" = 0 ] && exit $status

# Shared memory against Open MPI with a core per rank (the build machine has two),
# one bench/compare per world size so that a cut run still leaves the sizes done.
lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\))' | tee "$out/cpu.txt"
export OPAL_PREFIX="$PWD/.devcarry/ompi" OPAL_PKGLIBDIR="$PWD/.devcarry/ompi/pkglib"
export OPAL_PKGDATADIR="$PWD/.devcarry/ompi/share" OPAL_SYSCONFDIR="$PWD/.devcarry/ompi/etc"
export PMIX_PREFIX="$PWD/.devcarry/pmix" PMIX_PKGDATADIR="$PWD/.devcarry/pmix/share/pmix" PMIX_PKGLIBDIR="$PWD/.devcarry/pmix/lib/pmix"
export OMPI_MCA_plm=isolated OMPI_MCA_mca_base_component_show_load_errors=0
export PATH="$PWD/.devcarry/ompi/bin:$PATH"
# Two fake hosts (network namespaces) joined by a link shaped to 10 Gbit/s:
# distc against raw Gloo and torch.distributed (the machine's own PyTorch,
# where one has Gloo), with the link's rate from iperf3 in the same run.
if [ "${GPU_CHECK_HOSTS:-1}" != 0 ]; then
  py=$(command -v python3); impls=distc,gloo
  for c in /usr/bin/python3 "$py"; do
    if "$c" -c "import torch.distributed as d; assert d.is_gloo_available()" 2>/dev/null; then
      py=$c; impls=distc,gloo,torch; break
    fi
  done
  PATH="$PWD/.devcarry/net/wrap:$PATH" timeout 120 "$py" bench/compare .devcarry/build --python "$py" --hosts 2 \
    --ranks 2,4 --ops allreduce,broadcast --sizes 16M:64M --factor 2 --impls "$impls" --link-rate 10gbit \
    --time-ms 300 --timeout 60 2>&1 | tee "$out/compare_hosts.txt" || status=1
  echo "# hosts done at $SECONDS s"
fi
for n in ${GPU_CHECK_RANKS:-2 4 8}; do
  left=$(( ${GPU_CHECK_S:-560} - SECONDS ))
  [ "$left" -lt 40 ] && { echo "# no time left for $n ranks"; status=1; break; }
  timeout "$left" python3 bench/compare .devcarry/build --ranks "$n" --impls distc,mpi,memcpy \
    --sizes 8:64M --factor 8 --time-ms 80 --rounds "${GPU_CHECK_ROUNDS:-2}" --timeout 120 2>&1 \
    | tee "$out/compare_shm_${n}ranks.txt" || status=1
  echo "# $n ranks done at $SECONDS s"
done
exit $status
