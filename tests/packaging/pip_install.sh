#!/bin/sh
# pip builds the Python package against an installed libdistc, with no
# network and Debian's setuptools, and the result imports and runs a group
# with no LD_LIBRARY_PATH or PYTHONPATH beyond its own target directory.
#   pip_install.sh BUILD_DIR SOURCE_DIR PYTHON
set -eu
build=$1
src=$2
python=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "pip_install: $*"; exit 1; }

"$python" -m pip --version >/dev/null 2>&1 || { echo "SKIP: no pip for $python (Debian: python3-pip)"; exit 77; }
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install failed"; }
# A copy of the package's sources: pip builds in the tree it is given.
cp -r "$src/bindings/python" "$tmp/src"
rm -rf "$tmp/src/build"
DISTC_PREFIX="$tmp/prefix" "$python" -m pip install --no-build-isolation --no-index --no-deps \
    --target "$tmp/site" "$tmp/src" >"$tmp/pip.log" 2>&1 || { tail -n 40 "$tmp/pip.log"; fail "pip install failed"; }
[ -f "$tmp/site/distc/__init__.py" ] || fail "pip put no distc/ under --target"
ls "$tmp/site/distc/"_distc*.so >/dev/null 2>&1 || fail "pip built no _distc module"
cd "$tmp"
env -u LD_LIBRARY_PATH PYTHONPATH="$tmp/site" "$python" - <<'PY' || fail "the pip-installed package does not work"
import numpy as np
import distc as dist
import os
assert os.path.dirname(dist.__file__).startswith(os.environ["PYTHONPATH"]), dist.__file__
store = dist.HashStore()
dist.init_process_group("gloo", store=store, rank=0, world_size=1)
x = np.arange(4, dtype=np.float32)
dist.all_reduce(x)
assert x.tolist() == [0.0, 1.0, 2.0, 3.0], x
print("pip-installed distc", dist.__version__, "from", os.path.dirname(dist.__file__), "ran a group")
dist.destroy_process_group()
PY
# Without a prefix to build against, the error says what to set.
if env -u DISTC_PREFIX PKG_CONFIG_PATH="$tmp/nowhere" PKG_CONFIG_LIBDIR="$tmp/nowhere" \
    "$python" -m pip install --no-build-isolation --no-index --no-deps --target "$tmp/site2" "$tmp/src" \
    >"$tmp/pip2.log" 2>&1; then
    fail "pip built the package with no libdistc to build against"
fi
grep -q "set DISTC_PREFIX" "$tmp/pip2.log" || { tail -n 20 "$tmp/pip2.log"; fail "the error does not say to set DISTC_PREFIX"; }
echo "pip_install: ok"
