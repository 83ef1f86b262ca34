/* Prints the ABI-relevant layout of every public struct and the value of every
 * public enum constant, one fact per line. abi/check.sh compares the output
 * with the committed baseline: a line that changed or disappeared breaks
 * callers built against an older header; new lines (appended fields, new
 * constants) do not. Sizes are not compared, since options structs may grow. */
#include <distc.h>
#include <stddef.h>
#include <stdio.h>

#define OFF(T, f) printf("offset %s.%s %zu\n", #T, #f, offsetof(T, f))
#define VAL(c) printf("value %s %lld\n", #c, (long long)(c))

int main(void) {
    OFF(distc_buf, data);
    OFF(distc_buf, size);
    OFF(distc_tcp_store_options, version);
    OFF(distc_tcp_store_options, host);
    OFF(distc_tcp_store_options, port);
    OFF(distc_tcp_store_options, is_server);
    OFF(distc_tcp_store_options, world_size);
    OFF(distc_tcp_store_options, wait_for_workers);
    OFF(distc_tcp_store_options, timeout_ms);
    OFF(distc_tcp_store_options, connect_retries);
    OFF(distc_tcp_store_options, protocol);
    OFF(distc_rendezvous_options, version);
    OFF(distc_rendezvous_options, timeout_ms);
    OFF(distc_rendezvous_options, rank);
    OFF(distc_rendezvous_options, world_size);
    OFF(distc_store_vtable, version);
    OFF(distc_store_vtable, set);
    OFF(distc_store_vtable, get);
    OFF(distc_store_vtable, add);
    OFF(distc_store_vtable, compare_set);
    OFF(distc_store_vtable, check);
    OFF(distc_store_vtable, wait);
    OFF(distc_store_vtable, delete_key);
    OFF(distc_store_vtable, num_keys);
    OFF(distc_store_vtable, append);
    OFF(distc_store_vtable, multi_get);
    OFF(distc_store_vtable, multi_set);
    OFF(distc_store_vtable, free);
    OFF(distc_pg_options, version);
    OFF(distc_pg_options, backend);
    OFF(distc_pg_options, timeout_ms);
    OFF(distc_pg_options, group_name);
    OFF(distc_pg_options, debug);
    OFF(distc_p2p_op, kind);
    OFF(distc_p2p_op, tensor);
    OFF(distc_p2p_op, peer);
    OFF(distc_p2p_op, tag);
    OFF(distc_op_options, version);
    OFF(distc_op_options, timeout_ms);
    OFF(distc_op_options, premul_factor);
    VAL(DISTC_OK);
    VAL(DISTC_INPROGRESS);
    VAL(DISTC_EINVAL);
    VAL(DISTC_ETIMEOUT);
    VAL(DISTC_ENOTFOUND);
    VAL(DISTC_ENOTSUP);
    VAL(DISTC_EREMOTE);
    VAL(DISTC_EABORTED);
    VAL(DISTC_ESTATE);
    VAL(DISTC_ENOMEM);
    VAL(DISTC_EBACKEND);
    VAL(DISTC_EINTERNAL);
    VAL(DISTC_EIO);
    VAL(DISTC_EPROTO);
    VAL(DISTC_TIMEOUT_DEFAULT);
    VAL(DISTC_STORE_DEFAULT_TIMEOUT_MS);
    VAL(DISTC_STORE_MAX_VALUE_SIZE);
    VAL(DISTC_TCP_PROTOCOL_AUTO);
    VAL(DISTC_TCP_PROTOCOL_DISTC);
    VAL(DISTC_TCP_PROTOCOL_TORCH1);
    VAL(DISTC_TCP_PROTOCOL_TORCH2);
    VAL(DISTC_TCP_STORE_OPTIONS_VERSION);
    VAL(DISTC_RENDEZVOUS_OPTIONS_VERSION);
    VAL(DISTC_STORE_VTABLE_VERSION);
    VAL(DISTC_SUM);
    VAL(DISTC_AVG);
    VAL(DISTC_PRODUCT);
    VAL(DISTC_MIN);
    VAL(DISTC_MAX);
    VAL(DISTC_BAND);
    VAL(DISTC_BOR);
    VAL(DISTC_BXOR);
    VAL(DISTC_PREMUL_SUM);
    VAL(DISTC_ANY_SOURCE);
    VAL(DISTC_SPLIT_NOCOLOR);
    VAL(DISTC_P2P_SEND);
    VAL(DISTC_P2P_RECV);
    VAL(DISTC_PG_DEFAULT_TIMEOUT_MS);
    VAL(DISTC_PG_OPTIONS_VERSION);
    VAL(DISTC_OP_OPTIONS_VERSION);
    return 0;
}
