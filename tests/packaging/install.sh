#!/bin/sh
# Installs the build into a temporary prefix, moves the prefix (the package
# must be relocatable), runs the installed tools (a distc-run + distc-perf
# job, no LD_LIBRARY_PATH), then builds and runs a small consumer twice: with
# pkg-config and with CMake's find_package(distc).
# With PYTHON and PYDIR (where the package lands under the prefix) it also
# imports the installed Python package and runs a group with it.
#   install.sh BUILD_DIR LIBDIR CONSUMER_DIR [CMAKE] [CC] [PYTHON PYDIR]
set -eu
build=$1
libdir=$2
consumer=$3
cmake=${4:-cmake}
cc=${5:-cc}
python=${6:-}
pydir=${7:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install: $*"; exit 1; }

"$cmake" --install "$build" --prefix "$tmp/staged" > "$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install failed"; }
mv "$tmp/staged" "$tmp/moved"
prefix=$tmp/moved
lib=$prefix/$libdir

for f in include/distc.h include/distc/common.h include/distc/errors.h include/distc/version.h \
         include/distc/store.h include/distc/sys/store.h include/distc/pg.h include/distc/work.h \
         include/distc/sys/backend.h \
         "$libdir/pkgconfig/distc.pc" "$libdir/cmake/distc/distcConfig.cmake" \
         "$libdir/cmake/distc/distcConfigVersion.cmake" "$libdir/cmake/distc/distcTargets.cmake"; do
    [ -f "$prefix/$f" ] || fail "missing $f under the prefix (CMAKE_INSTALL_LIBDIR=$libdir)"
done
# The manual pages, when the build made them (DISTC_INSTALL_MANDIR: share/man).
if [ -n "${DISTC_INSTALL_MANDIR:-}" ]; then
    for f in man3/distc_allreduce.3 man3/distc_store_get.3 man3/libdistc.3 man1/distc-run.1 man1/distc-perf.1 \
             man1/distc-store.1 man7/distc.7; do
        [ -f "$prefix/$DISTC_INSTALL_MANDIR/$f" ] || fail "missing $DISTC_INSTALL_MANDIR/$f under the prefix"
    done
fi
# The library: the real file, the SONAME link and the development link.
[ -L "$lib/libdistc.so" ] || fail "missing the $libdir/libdistc.so link"
[ -L "$lib/libdistc.so.0" ] || fail "missing the $libdir/libdistc.so.0 link"
[ -f "$(readlink -f "$lib/libdistc.so")" ] || fail "libdistc.so points nowhere"
# Backend plugins built here are installed in <libdir>/distc and find the installed libdistc.
for p in "$build"/distc/libdistc-*.so; do
    [ -e "$p" ] || continue
    n=$(basename "$p")
    [ -f "$lib/distc/$n" ] || fail "plugin $n is not installed in $libdir/distc"
    (unset LD_LIBRARY_PATH; ldd "$lib/distc/$n") | grep -q "libdistc.so.0 => $prefix" ||
        fail "the installed $n does not find the installed libdistc.so.0"
done
# The installed tools find the installed libdistc by themselves (their run
# path is relative to where they lie), and run a job from the moved prefix.
for t in distc-run distc-perf distc-store; do
    [ -x "$prefix/bin/$t" ] || fail "missing bin/$t"
    (unset LD_LIBRARY_PATH; ldd "$prefix/bin/$t") | grep -q "libdistc.so.0 => $prefix" ||
        fail "the installed $t does not find the installed libdistc.so.0: $(unset LD_LIBRARY_PATH; ldd "$prefix/bin/$t" | grep distc)"
done
(unset LD_LIBRARY_PATH; "$prefix/bin/distc-store" --help) > "$tmp/store_help" 2>&1 || fail "installed distc-store --help: $(cat "$tmp/store_help")"
(unset LD_LIBRARY_PATH; "$prefix/bin/distc-run" -n 2 "$prefix/bin/distc-perf" -b 8 -e 1K -f 8 -n 2 -w 1) > "$tmp/job" 2>&1 ||
    { cat "$tmp/job"; fail "the installed distc-run + distc-perf job failed"; }
grep -q "OK: all results correct" "$tmp/job" || { cat "$tmp/job"; fail "the installed distc-perf job did not check out"; }

if [ -n "$python" ]; then
    [ -d "$prefix/$pydir/distc" ] || fail "the Python package is not installed in $pydir"
    (unset LD_LIBRARY_PATH; PYTHONPATH="$prefix/$pydir" "$python" -c '
import numpy as np, distc
assert distc.__file__.startswith("'"$prefix"'"), distc.__file__
with distc.ProcessGroup(distc.HashStore(), 0, 1) as pg:
    x = np.arange(4, dtype=np.float32)
    pg.all_reduce(x)
    assert x.tolist() == [0, 1, 2, 3], x
print("OK")') > "$tmp/py" 2>&1 || { cat "$tmp/py"; fail "the installed Python package does not run"; }
fi

# Nothing in the installed files remembers the staging prefix.
if grep -rl "$tmp/staged" "$prefix" --include='*.pc' --include='*.cmake' >/dev/null; then
    fail "installed files hard-code the install prefix: $(grep -rl "$tmp/staged" "$prefix" --include='*.pc' --include='*.cmake')"
fi

# Flags the library was built with that its users need too (a sanitizer build).
extra=${DISTC_CONSUMER_CFLAGS:-}

# 1. pkg-config, from the moved prefix.
export PKG_CONFIG_PATH="$lib/pkgconfig"
ver=$(pkg-config --modversion distc) || fail "pkg-config cannot find distc"
flags=$(pkg-config --cflags --libs distc)
case "$flags" in *"$prefix"*) ;; *) fail "pkg-config flags do not point into the prefix: $flags" ;; esac
# shellcheck disable=SC2086
"$cc" -std=c99 -Wall -Wextra -Werror $extra "$consumer/main.c" $flags -o "$tmp/consumer_pc" || fail "pkg-config consumer does not build"
out=$(LD_LIBRARY_PATH="$lib" "$tmp/consumer_pc") || fail "pkg-config consumer failed: $out"
[ "$out" = "OK $ver" ] || fail "pkg-config consumer printed '$out', expected 'OK $ver'"

# 2. CMake find_package(distc) and distc::distc, from the moved prefix.
"$cmake" -S "$consumer" -B "$tmp/cbuild" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
        -DCMAKE_C_FLAGS="$extra" > "$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log"; fail "the CMake consumer does not configure"; }
"$cmake" --build "$tmp/cbuild" > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "the CMake consumer does not build"; }
out=$(LD_LIBRARY_PATH="$lib" "$tmp/cbuild/consumer") || fail "CMake consumer failed: $out"
[ "$out" = "OK $ver" ] || fail "CMake consumer printed '$out', expected 'OK $ver'"
# A different major version is refused (distcConfigVersion.cmake: SameMajorVersion).
if "$cmake" -S "$consumer" -B "$tmp/cbuild2" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
        -DDISTC_WANT_VERSION=1.0 > "$tmp/cmake2.log" 2>&1; then
    fail "find_package(distc 1.0) accepted version $ver"
fi
# The CMake consumer also runs without LD_LIBRARY_PATH (CMake's build rpath).
out=$("$tmp/cbuild/consumer") || fail "CMake consumer failed without LD_LIBRARY_PATH: $out"

echo "install: prefix relocatable, $libdir/pkgconfig and $libdir/cmake/distc work, consumers print '$out'"
