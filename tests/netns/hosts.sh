# Fake hosts for multi-host tests, sourced by the tests in this folder.
#
# netns_up N makes N hosts: network namespaces h0..h(N-1), each with its own
# loopback and an eth0 (10.88.0.(i+1)/24 and fd88::(i+1)/64) on a bridge in a
# switch namespace, so that traffic between hosts crosses a link the test can
# cut (netns_cut i) or shape (netns_shape i ...). Each host's name (the
# machine's, and nodeK) resolves to 127.0.1.1 there, as on a stock Debian
# machine; the other hosts' nodeJ to their addresses. Nothing is added to the
# machine's own network namespace; every namespace (and /etc/netns entry) is
# removed on exit, with what still runs inside.
#
# Needs root and a kernel that makes namespaces: where it cannot, the test
# exits 77 (CTest's skip) saying why.
#
# NETNS_WIRE="--delay-us US --loss PERCENT": the hosts meet through
# netns_wire (wire.c, at $NETNS_WIRE_BIN) instead of the bridge: a switch in
# user space that delays and drops frames, for kernels without tc's netem.
# Each host's eth0 is then a TAP device of that switch; cutting and shaping
# do not apply.

NETNS_ID="${NETNS_ID:-dc$$}"
NETNS_N=0

netns_name() { echo "${NETNS_ID}h$1"; }
netns_switch() { echo "${NETNS_ID}sw"; }
netns_addr() { echo "10.88.0.$(($1 + 1))"; }
netns_addr6() { echo "fd88::$(($1 + 1))"; }

netns_down() {
    for _i in $(seq 0 $((NETNS_N - 1))) sw; do
        _ns="${NETNS_ID}h$_i"
        [ "$_i" = sw ] && _ns=$(netns_switch)
        _pids=$(ip netns pids "$_ns" 2>/dev/null || true)
        [ -n "$_pids" ] && kill -9 $_pids 2>/dev/null
        ip netns del "$_ns" 2>/dev/null
        rm -rf "/etc/netns/$_ns"
    done
    rmdir /etc/netns 2>/dev/null
    return 0
}

netns_skip() {
    echo "SKIP: $*"
    netns_down
    exit 77
}

# NETNS_KEEP=1: no traps; whoever made the hosts calls netns_down (with the
# same NETNS_ID and NETNS_N), as bench/compare --hosts does.
netns_up() {
    NETNS_N=$1
    if [ "${NETNS_KEEP:-0}" != 1 ]; then
        trap 'netns_down' EXIT
        trap 'exit 130' INT TERM
    fi
    [ "$(id -u)" -eq 0 ] || netns_skip "network namespaces need root"
    command -v ip >/dev/null || netns_skip "no ip(8) (Debian's iproute2)"
    _sw=$(netns_switch)
    ip netns add "$_sw" 2>/dev/null || netns_skip "this kernel does not let us make network namespaces (ip netns add failed)"
    if [ -n "${NETNS_WIRE:-}" ]; then
        netns_wire_up
    else
        ip -n "$_sw" link add br0 type bridge || netns_skip "no bridge device in this kernel"
        ip -n "$_sw" link set br0 up
    fi
    for _i in $(seq 0 $((NETNS_N - 1))); do
        _h=$(netns_name "$_i")
        ip netns add "$_h" || netns_skip "cannot make namespace $_h"
        if [ -n "${NETNS_WIRE:-}" ]; then
            ip -n "$_sw" link set "t$_i" netns "$_h" || netns_skip "cannot move a TAP device into $_h"
            ip -n "$_h" link set "t$_i" name eth0
        else
            ip -n "$_sw" link add "v$_i" type veth peer name eth0 netns "$_h" || netns_skip "no veth pairs in this kernel"
            ip -n "$_sw" link set "v$_i" master br0
            ip -n "$_sw" link set "v$_i" up
        fi
        ip -n "$_h" addr add "$(netns_addr "$_i")/24" dev eth0
        ip -n "$_h" addr add "$(netns_addr6 "$_i")/64" dev eth0 nodad 2>/dev/null
        ip -n "$_h" link set lo up
        ip -n "$_h" link set eth0 up
    done
    # Each host calls itself nodeK on 127.0.1.1, as Debian's /etc/hosts
    # does, and knows the others' names by their addresses (like DNS).
    for _i in $(seq 0 $((NETNS_N - 1))); do
        _h=$(netns_name "$_i")
        mkdir -p "/etc/netns/$_h"
        {
            printf '127.0.0.1 localhost\n127.0.1.1 %s node%d\n' "$(hostname)" "$_i"
            for _j in $(seq 0 $((NETNS_N - 1))); do
                [ "$_j" = "$_i" ] || printf '%s node%d\n' "$(netns_addr "$_j")" "$_j"
            done
        } >"/etc/netns/$_h/hosts"
    done
}

# Starts netns_wire in the switch namespace with one TAP device per host
# (t0..), its messages in $NETNS_WIRE_LOG; they are moved into the hosts.
netns_wire_up() {
    [ -x "${NETNS_WIRE_BIN:-}" ] || netns_skip "no netns_wire program (NETNS_WIRE_BIN)"
    [ -c /dev/net/tun ] || netns_skip "no /dev/net/tun: this kernel cannot make TAP devices"
    NETNS_WIRE_LOG="${NETNS_WIRE_LOG:-/dev/null}"
    _taps=""
    for _i in $(seq 0 $((NETNS_N - 1))); do _taps="$_taps t$_i"; done
    _ready=$(mktemp)
    # shellcheck disable=SC2086 # NETNS_WIRE holds several arguments
    ip netns exec "$(netns_switch)" "$NETNS_WIRE_BIN" $NETNS_WIRE $_taps >"$_ready" 2>>"$NETNS_WIRE_LOG" &
    _n=0
    until grep -q ready "$_ready"; do
        _n=$((_n + 1))
        [ $_n -gt 100 ] && { rm -f "$_ready"; netns_skip "netns_wire did not start (see $NETNS_WIRE_LOG)"; }
        sleep 0.05
    done
    rm -f "$_ready"
}

# netns_exec I CMD...: runs CMD on host I, with no interface named for it.
netns_exec() {
    _h=$(netns_name "$1")
    shift
    ip netns exec "$_h" env -u GLOO_SOCKET_IFNAME -u DISTC_IFNAME -u DISTC_GLOO_IFNAME -u DISTC_HOSTNAME "$@"
}

# Cuts host I off the switch (its eth0 stays up, so its ranks see no error
# from the kernel: only silence), and joins it again.
netns_cut() { ip -n "$(netns_switch)" link set "v$1" down; }
netns_join() { ip -n "$(netns_switch)" link set "v$1" up; }

# netns_shape I QDISC-ARGS...: e.g. netns_shape 0 netem delay 1ms loss 1%,
# or netns_shape 0 tbf rate 10gbit burst 4mb latency 5ms.
# Returns 1 where the kernel has no such queueing discipline.
netns_shape() {
    _i=$1
    shift
    ip netns exec "$(netns_name "$_i")" tc qdisc add dev eth0 root "$@" 2>/dev/null
}

# A port for the store: nothing else listens inside the fresh namespaces.
netns_port() { echo $((20000 + $$ % 20000)); }
