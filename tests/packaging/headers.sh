#!/bin/sh
# The public headers compile warning-free as strict C99 and as C++17, each
# header on its own (self-contained) and all of them through <distc.h>.
#   headers.sh INCLUDE_DIR SOURCE_DIR [CC] [CXX]
set -eu
inc=$1
src=$2
cc=${3:-cc}
cxx=${4:-c++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cflags="-std=c99 -pedantic -Wall -Wextra -Werror -Wstrict-prototypes -Wshadow -Wundef"
cxxflags="-std=c++17 -pedantic -Wall -Wextra -Werror -Wshadow -Wundef"

# The umbrella header, used in a program, as C and as C++: both must also run.
$cc $cflags -I"$inc" "$src/header_check.c" -o "$tmp/check_c"
$cxx $cxxflags -x c++ -I"$inc" "$src/header_check.c" -o "$tmp/check_cxx"
"$tmp/check_c" >/dev/null
"$tmp/check_cxx" >/dev/null

# Every header alone.
n=0
for h in $(cd "$inc" && find . -name '*.h' | sed 's|^\./||' | sort); do
    printf '#include <%s>\nint distc_header_check_dummy;\n' "$h" > "$tmp/one.c"
    $cc $cflags -fsyntax-only -I"$inc" "$tmp/one.c" || { echo "headers: <$h> fails as C99"; exit 1; }
    $cxx $cxxflags -fsyntax-only -x c++ -I"$inc" "$tmp/one.c" || { echo "headers: <$h> fails as C++17"; exit 1; }
    n=$((n + 1))
done
[ "$n" -ge 5 ] || { echo "headers: found only $n headers under $inc"; exit 1; }
echo "headers: <distc.h> and $n headers compile as C99 and C++17"
