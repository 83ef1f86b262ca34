#!/usr/bin/env bash
# ABI check against the committed baseline (abi/libdistc.abi, abi/layout.txt).
#   abi/check.sh BUILD_DIR            check; exit 1 on an incompatible change
#   abi/check.sh BUILD_DIR --update   rewrite the baseline (after a deliberate addition)
# Symbols: abidiff (abigail-tools) on the library without debug info, so the
# check sees the exported functions and their version node, not C++ internals
# behind the opaque handles. Layout: abi/layout.c's offsets and constants.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

lib=$(readlink -f "$build/libdistc.so")
objcopy --strip-debug "$lib" "$tmp/libdistc.so.0"
cc -std=c99 -Wall -Werror -I "$here/../include" "$here/layout.c" -o "$tmp/layout"
"$tmp/layout" > "$tmp/layout.txt"

if [ "${2:-}" = "--update" ]; then
  abidw --no-corpus-path "$tmp/libdistc.so.0" > "$here/libdistc.abi"
  cp "$tmp/layout.txt" "$here/layout.txt"
  echo "abi: baseline updated"
  exit 0
fi

status=0
set +e
abidiff --no-show-locs "$here/libdistc.abi" "$tmp/libdistc.so.0" > "$tmp/abidiff.txt"
rc=$?
set -e
# abidiff's exit code is a bit set: 1 error, 2 usage, 4 ABI change, 8 incompatible change.
if [ $((rc & 3)) -ne 0 ]; then
  echo "abi: abidiff failed to run (exit $rc)"; cat "$tmp/abidiff.txt"; exit 1
fi
if [ $((rc & 8)) -ne 0 ]; then
  echo "abi: INCOMPATIBLE symbol change against abi/libdistc.abi:"; cat "$tmp/abidiff.txt"; status=1
elif [ $((rc & 4)) -ne 0 ]; then
  echo "abi: compatible additions (run abi/check.sh BUILD --update to record them):"; cat "$tmp/abidiff.txt"
fi
missing=$(grep -vxF -f "$tmp/layout.txt" "$here/layout.txt" || true)
if [ -n "$missing" ]; then
  echo "abi: struct layout or constant changed (baseline lines no longer true):"; echo "$missing"; status=1
fi
[ $status -eq 0 ] && echo "abi: compatible with the baseline ($(grep -c . "$here/layout.txt") layout facts, $(grep -c '<elf-symbol' "$here/libdistc.abi") symbols)"
exit $status
