#!/bin/sh
# Parses every Julia file of bindings/julia with tree-sitter's Julia grammar.
# Installs web-tree-sitter and tree-sitter-julia (versions in package.json)
# into BUILD_DIR/julia-syntax with --ignore-scripts (tree-sitter-cli would
# download a binary and fail here). Exit 77 (CTest: skipped) when node/npm
# are missing or the npm registry cannot be reached; 1 on a syntax error.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dest="$1/julia-syntax"
command -v node >/dev/null && command -v npm >/dev/null || { echo "julia syntax: node/npm not found: skipped"; exit 77; }
if [ ! -f "$dest/node_modules/tree-sitter-julia/tree-sitter-julia.wasm" ]; then
  mkdir -p "$dest"
  cp "$here/package.json" "$dest/package.json"
  if ! (cd "$dest" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error); then
    echo "julia syntax: npm install failed (registry unreachable?): skipped"
    exit 77
  fi
fi
cd "$here/.."
exec node "$here/check.cjs" "$dest/node_modules" $(find . -name '*.jl' | sort)
