# Sourced by the launcher test scripts: `check NAME CONDITION...` runs the
# condition, prints "ok   NAME" or "FAIL NAME", and counts failures in
# $fails (the script exits with it); `has PATTERN FILE` greps for it.
fails=0
check() {
    name=$1
    shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
has() { grep -q -- "$1" "$2"; }
