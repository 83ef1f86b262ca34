#!/usr/bin/env bash
# Fails when a C or C++ source is not as .clang-format writes it; prints the
# files. Format with `tools/check-format.sh --fix` (clang-format -i), never
# by hand. Skips (exit 77) where clang-format-14 is not installed: the style
# file is read the same way by no other version.
#   tools/check-format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14 || true)
[ -n "$cf" ] || { echo "check-format: clang-format-14 not installed, skipped"; exit 77; }
mapfile -t files < <(find src include tests tools bench examples bindings/python \
  \( -name build -o -name corpus \) -prune -o \
  -type f \( -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' \) -print | sort)
if [ "${1:-}" = --fix ]; then
  "$cf" -i --style=file "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$cf" --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'check-format: not formatted: %s\n' "${bad[@]}"
  echo "check-format: run tools/check-format.sh --fix"
  exit 1
fi
echo "check-format: ${#files[@]} files as .clang-format writes them"
