#!/bin/sh
# Only distc_* leaves the library, every function the headers declare is
# exported under the DISTC_0 version node, and the SONAME is libdistc.so.0.
#   symbols.sh LIBRARY INCLUDE_DIR
set -eu
lib=$1
inc=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0

nm -D --defined-only --with-symbol-versions "$lib" > "$tmp/nm.txt"
# Columns: [address] type name[@@version]. Type A is the version node itself.
awk 'NF >= 2 { print $(NF-1), $NF }' "$tmp/nm.txt" > "$tmp/syms.txt"
bad=$(awk '$1 ~ /^[TDBRVWiu]$/ {
             n = $2; sub(/@.*/, "", n)
             if (n !~ /^distc_/ && n !~ /^(_init|_fini|_edata|_end|__bss_start)$/) print $1, $2
           }' "$tmp/syms.txt")
if [ -n "$bad" ]; then
    echo "symbols: exported symbols without the distc_ prefix:"; echo "$bad"; status=1
fi
other=$(awk '$1 !~ /^[TDBRVWiuA]$/ { print $1, $2 }' "$tmp/syms.txt")
if [ -n "$other" ]; then
    echo "symbols: exported symbols of unexpected types:"; echo "$other"; status=1
fi
unversioned=$(awk '$1 != "A" && $2 ~ /^distc_/ && $2 !~ /@@DISTC_0$/ { print $2 }' "$tmp/syms.txt")
if [ -n "$unversioned" ]; then
    echo "symbols: distc_ symbols outside the DISTC_0 version node:"; echo "$unversioned"; status=1
fi
grep -q ' A DISTC_0$' "$tmp/nm.txt" || { echo "symbols: no DISTC_0 version node"; status=1; }

# Every DISTC_EXTERN function of the headers is exported, and nothing else is.
find "$inc" -name '*.h' -exec cat {} + | tr '\n' ' ' |
    grep -o 'DISTC_EXTERN([^)]*) *distc_[A-Za-z0-9_]*' | sed 's/.* *\(distc_[A-Za-z0-9_]*\)$/\1/' |
    sort -u > "$tmp/declared.txt"
awk '$1 ~ /^[TDBRVWiu]$/ { n = $2; sub(/@.*/, "", n); print n }' "$tmp/syms.txt" | sort -u > "$tmp/exported.txt"
[ "$(wc -l < "$tmp/declared.txt")" -ge 20 ] || { echo "symbols: found too few declarations in $inc"; status=1; }
missing=$(comm -23 "$tmp/declared.txt" "$tmp/exported.txt")
extra=$(comm -13 "$tmp/declared.txt" "$tmp/exported.txt")
if [ -n "$missing" ]; then echo "symbols: declared in the headers but not exported:"; echo "$missing"; status=1; fi
if [ -n "$extra" ]; then echo "symbols: exported but declared in no header:"; echo "$extra"; status=1; fi

# SONAME carries the major version only.
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
if [ "$soname" != "libdistc.so.0" ]; then
    echo "symbols: SONAME is '$soname', expected libdistc.so.0"; status=1
fi
objdump -p "$lib" | grep -q 'SONAME  *libdistc\.so\.0$' || { echo "symbols: objdump disagrees on the SONAME"; status=1; }

[ $status -eq 0 ] && echo "symbols: $(wc -l < "$tmp/exported.txt") exported functions, all distc_*, all declared, SONAME $soname"
exit $status
