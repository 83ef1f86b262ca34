#!/bin/sh
# distc-store: bad arguments are named (exit 2) before anything listens; a
# server on 127.0.0.1 reports its port, writes the port file, and stops
# cleanly on SIGTERM.
#   test_distc_store.sh DISTC_STORE
set -u
store=$1
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/checks.sh"
# refused "what" "message" ARGS...: exit 2, the message on stderr.
refused() {
    what=$1
    want=$2
    shift 2
    "$store" "$@" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    check "$what" sh -c "[ $rc -eq 2 ] && grep -qF -- \"$want\" '$tmp/err'"
    [ $rc -eq 2 ] || cat "$tmp/err"
}

refused "an unknown option" "unknown option --bogus" --bogus
refused "an option without its value" "--port needs a value" --port
refused "an empty port" "bad --port ''" --port ""
refused "a port out of range" "bad --port '70000'" --port 70000
refused "a request limit under 4096, in the tool's words" "bad --max-request-bytes '1' (at least 4096 bytes)" \
    --max-request-bytes 1
refused "a zero reply limit" "bad --max-unread-reply-bytes '0' (at least 1 bytes)" --max-unread-reply-bytes 0
refused "a limit that is no size" "bad --max-request-bytes '4x'" --max-request-bytes 4x

"$store" --host 127.0.0.1 --port 0 --port-file "$tmp/port" --max-request-bytes 64K > "$tmp/out" 2> "$tmp/err" &
pid=$!
i=0
while [ ! -s "$tmp/port" ] && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
done
port=$(cat "$tmp/port" 2>/dev/null)
check "the port file holds the port" sh -c "[ -n '$port' ] && [ '$port' -gt 0 ]"
check "it says where it listens" grep -q "listening on 127.0.0.1:$port" "$tmp/out"
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
check "SIGTERM stops it cleanly" sh -c "[ $rc -eq 0 ] && grep -q 'shutting down' '$tmp/out'"

[ $fails -eq 0 ] && echo "all distc-store checks passed"
exit $fails
