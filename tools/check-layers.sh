#!/usr/bin/env bash
# Fails on an #include that crosses a layer the wrong way (README, Layout).
# Layers from the top: capi/ -> core/ -> backends/; support/ is header-only
# code every layer and the plugins may use, and it uses nothing of distc.
# The plugins (backends/mpi, backends/nccl) are libraries of their own: they
# use the public headers (distc/...), support/ and their own folder only.
# Beneath the host backend, a transport (backends/host/transport/<name>/)
# uses what the transports share (the files of backends/host/transport/
# itself: the interface, the exchange engine) and its own folder of
# backends/, never the algorithms above it or another transport.
#   tools/check-layers.sh [SRC_DIR]   (default: src/ next to tools/)
set -euo pipefail
src=${1:-"$(dirname "$0")/../src"}
cd "$src"
bad=0
# One grep for every quoted include; the rules are checked per line.
while IFS= read -r hit; do
  layer=${hit%%:*}
  layer=${layer#./}
  inc=${hit#*\"}
  inc=${inc%%\"*}
  top=${inc%%/*}
  why=""
  case "$layer" in
    core/*) case "$top" in capi|backends) why="core/ uses neither capi/ nor backends/";; esac ;;
    backends/mpi/*|backends/nccl/*)
      plugin=${layer#backends/}; plugin=${plugin%%/*}
      case "$inc" in distc/*|distc.h|support/*|backends/"$plugin"/*) ;;
        *) why="a plugin uses the public headers, support/ and its own folder only";; esac ;;
    backends/host/transport/*/*)
      transport=${layer#backends/host/transport/}; transport=${transport%%/*}
      case "$inc" in
        capi/*) why="backends/ do not use capi/";;
        backends/host/transport/"$transport"/*) ;;
        backends/host/transport/*/*) why="a transport uses the shared transport files and its own folder only";;
        backends/host/transport/*) ;;
        backends/*) why="a transport uses the shared transport files and its own folder only";;
      esac ;;
    backends/*) case "$top" in capi) why="backends/ do not use capi/";; esac ;;
    support/*) case "$inc" in distc/*|distc.h) ;; *) why="support/ uses nothing of distc but its public headers";; esac ;;
  esac
  if [ -n "$why" ]; then
    echo "check-layers: $layer includes \"$inc\": $why"
    bad=1
  fi
done < <(grep -rHE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' --include='*.cpp' --include='*.hpp' --include='*.h' --include='*.c' . || true)
[ $bad -eq 0 ] && echo "check-layers: every include points down"
exit $bad
