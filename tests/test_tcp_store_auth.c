/* The TCP store's token: clients that know it are served, others are refused
 * with a clear error on both sides (the client's error, the server's log);
 * PyTorch-protocol clients are admitted or refused as the option says. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test_util.h"

/* What the server logged. */
typedef struct logbook {
    pthread_mutex_t mu;
    char text[16384];
} logbook;

static void collect(void *payload, const char *line) {
    logbook *b = payload;
    pthread_mutex_lock(&b->mu);
    size_t used = strlen(b->text);
    snprintf(b->text + used, sizeof b->text - used, "%s\n", line);
    pthread_mutex_unlock(&b->mu);
}

/* The server logs a refusal before the client can see it: no waiting needed. */
static void assert_logged(logbook *b, const char *needle) {
    pthread_mutex_lock(&b->mu);
    int found = strstr(b->text, needle) != NULL;
    pthread_mutex_unlock(&b->mu);
    if (!found) fail_msg("the server's log lacks '%s':\n%s", needle, b->text);
}

static distc_store *server(int32_t *port, const char *token, int allow_torch, logbook *b) {
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.is_server = 1;
    o.timeout_ms = 5000;
    o.token = token;
    o.allow_torch_clients = allow_torch;
    if (b) {
        pthread_mutex_init(&b->mu, NULL);
        b->text[0] = 0;
        o.server_log = collect;
        o.server_log_payload = b;
    }
    distc_store *s = NULL;
    ASSERT_OK(distc_store_new_tcp(&s, &o));
    ASSERT_OK(distc_store_tcp_port(port, s));
    return s;
}

static int client(distc_store **out, int32_t port, const char *token, int protocol) {
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.port = port;
    o.timeout_ms = 5000;
    o.token = token;
    o.protocol = protocol;
    *out = NULL;
    return distc_store_new_tcp(out, &o);
}

static void round_trip(distc_store *s, const char *key) {
    ASSERT_OK(distc_store_set(s, key, "v", 1));
    distc_buf b = {0};
    ASSERT_OK(distc_store_get(&b, s, key));
    assert_int_equal(b.size, 1);
    distc_buf_dispose(&b);
}

static void test_right_token(void **state) {
    (void)state;
    int32_t port;
    distc_store *srv = server(&port, "s3cret", -1, NULL);
    distc_store *c = NULL, *c2 = NULL;
    ASSERT_OK(client(&c, port, "s3cret", DISTC_TCP_PROTOCOL_AUTO));
    ASSERT_OK(client(&c2, port, "s3cret", DISTC_TCP_PROTOCOL_DISTC));
    round_trip(c, "a");
    round_trip(srv, "b"); /* the serving process's own client has the token too */
    int64_t v = 0;
    ASSERT_OK(distc_store_add(&v, c2, "n", 2));
    assert_int_equal(v, 2);
    const char *keys[] = {"a", "b"};
    distc_buf out[2];
    ASSERT_OK(distc_store_multi_get(out, c2, keys, 2));
    distc_buf_dispose(&out[0]);
    distc_buf_dispose(&out[1]);
    distc_store_free(c);
    distc_store_free(c2);
    distc_store_free(srv);
}

static void test_wrong_token(void **state) {
    (void)state;
    int32_t port;
    logbook b;
    distc_store *srv = server(&port, "s3cret", -1, &b);
    distc_store *c = NULL;
    ASSERT_ERR(client(&c, port, "guess", DISTC_TCP_PROTOCOL_AUTO), DISTC_EREMOTE, "rejected the token");
    dt_assert_contains(distc_error_last(), "127.0.0.1");
    assert_null(c);
    assert_logged(&b, "refused 127.0.0.1:");
    assert_logged(&b, "token rejected");
    distc_store_free(srv);
}

static void test_no_token(void **state) {
    (void)state;
    int32_t port;
    logbook b;
    distc_store *srv = server(&port, "s3cret", -1, &b);
    distc_store *c = NULL;
    ASSERT_ERR(client(&c, port, "", DISTC_TCP_PROTOCOL_AUTO), DISTC_EREMOTE, "requires a token (set DISTC_STORE_TOKEN");
    ASSERT_ERR(client(&c, port, "", DISTC_TCP_PROTOCOL_DISTC), DISTC_EREMOTE, "requires a token");
    assert_logged(&b, "no token given");
    distc_store_free(srv);
}

/* NULL takes $DISTC_STORE_TOKEN, on both sides; "" means none whatever it says. */
static void test_token_from_environment(void **state) {
    (void)state;
    setenv("DISTC_STORE_TOKEN", "from-env", 1);
    int32_t port;
    distc_store *srv = server(&port, NULL, -1, NULL);
    distc_store *c = NULL;
    ASSERT_OK(client(&c, port, NULL, DISTC_TCP_PROTOCOL_AUTO));
    round_trip(c, "k");
    distc_store_free(c);
    ASSERT_OK(client(&c, port, "from-env", DISTC_TCP_PROTOCOL_AUTO));
    distc_store_free(c);
    ASSERT_ERR(client(&c, port, "", DISTC_TCP_PROTOCOL_AUTO), DISTC_EREMOTE, "requires a token");
    ASSERT_ERR(client(&c, port, "other", DISTC_TCP_PROTOCOL_AUTO), DISTC_EREMOTE, "rejected the token");
    distc_store_free(srv);
    /* A server told "" has no token: the environment's is not asked for. */
    srv = server(&port, "", -1, NULL);
    ASSERT_OK(client(&c, port, "", DISTC_TCP_PROTOCOL_TORCH1));
    round_trip(c, "k");
    distc_store_free(c);
    distc_store_free(srv);
    unsetenv("DISTC_STORE_TOKEN");
}

/* PyTorch's protocols cannot prove a token: refused unless admitted. A distc
 * client speaking them stands in for PyTorch (tests/python has the real one). */
static void test_torch_clients(void **state) {
    (void)state;
    const int torch[] = {DISTC_TCP_PROTOCOL_TORCH1, DISTC_TCP_PROTOCOL_TORCH2};
    for (int i = 0; i < 2; ++i) {
        int32_t port;
        logbook b;
        distc_store *srv = server(&port, "s3cret", -1, &b);
        distc_store *c = NULL;
        ASSERT_OK(client(&c, port, "s3cret", torch[i])); /* nothing is asked before the first query */
        distc_buf v = {0};
        /* The server drops the connection: a close, or a reset when our request is still unread there. */
        ASSERT_ERR(distc_store_get(&v, c, "k"), DISTC_EREMOTE, "store server 127.0.0.1");
        ASSERT_ERR(distc_store_add(NULL, c, "n", 1), DISTC_EREMOTE, "store server 127.0.0.1"); /* not a bad value */
        assert_logged(&b, "PyTorch-protocol client");
        assert_logged(&b, "allow_torch_clients");
        distc_store_free(c);
        distc_store_free(srv);

        srv = server(&port, "s3cret", 1, NULL);
        ASSERT_OK(client(&c, port, NULL, torch[i]));
        round_trip(c, "k");
        distc_store_free(c);
        distc_store_free(srv);

        srv = server(&port, "", 0, NULL); /* refused without a token too */
        ASSERT_OK(client(&c, port, NULL, torch[i]));
        ASSERT_ERR(distc_store_get(&v, c, "k"), DISTC_EREMOTE, "store server 127.0.0.1");
        distc_store_free(c);
        distc_store_free(srv);
    }
}

static int raw_connect(int32_t port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) fail_msg("raw connect failed");
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void hello(int fd, uint32_t version) {
    uint8_t m[9] = {0x40};
    uint32_t magic = 0x43545344;
    memcpy(m + 1, &magic, 4);
    memcpy(m + 5, &version, 4);
    assert_int_equal(send(fd, m, sizeof m, MSG_NOSIGNAL), (ssize_t)sizeof m);
}

static int closed_by_server(int fd) {
    uint8_t b[64];
    ssize_t r;
    while ((r = recv(fd, b, sizeof b, 0)) > 0) {}
    return r == 0 || errno == ECONNRESET;
}

/* A client that skips AUTH, speaks an older distc protocol, or sends junk
 * for its AUTH is dropped, and the log says why. */
static void test_unauthenticated_requests(void **state) {
    (void)state;
    int32_t port;
    logbook b;
    distc_store *srv = server(&port, "s3cret", -1, &b);

    int fd = raw_connect(port);
    hello(fd, 3);
    uint8_t reply[4 + 4 + 8 + 1 + 32];
    assert_int_equal(recv(fd, reply, sizeof reply, MSG_WAITALL), (ssize_t)sizeof reply);
    assert_int_equal(reply[16], 1); /* a token is required; the nonce follows */
    uint8_t set[] = {1 /* SET */, 1, 0, 0, 0, 0, 0, 0, 0, 'k', 1, 0, 0, 0, 0, 0, 0, 0, 'v'};
    send(fd, set, sizeof set, MSG_NOSIGNAL);
    assert_true(closed_by_server(fd));
    close(fd);
    assert_logged(&b, "SET before authenticating");

    fd = raw_connect(port);
    hello(fd, 2);
    assert_true(closed_by_server(fd));
    close(fd);
    assert_logged(&b, "version 2 cannot prove the token");

    fd = raw_connect(port);
    hello(fd, 3);
    assert_int_equal(recv(fd, reply, sizeof reply, MSG_WAITALL), (ssize_t)sizeof reply);
    uint8_t junk[8192];
    memset(junk, 0x42, sizeof junk);
    send(fd, junk, sizeof junk, MSG_NOSIGNAL);
    assert_true(closed_by_server(fd));
    close(fd);
    assert_logged(&b, "INVALID before authenticating");

    distc_store *c = NULL;
    ASSERT_OK(client(&c, port, "s3cret", DISTC_TCP_PROTOCOL_AUTO));
    round_trip(c, "still-serving");
    distc_store_free(c);
    distc_store_free(srv);
}

/* A version-3 server tells its max_request_bytes: the client refuses a larger
 * request itself, with the reason, and keeps its connection. */
static void test_client_knows_the_request_limit(void **state) {
    (void)state;
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.is_server = 1;
    o.max_request_bytes = 65536;
    distc_store *srv = NULL;
    ASSERT_OK(distc_store_new_tcp(&srv, &o));
    size_t n = 100000;
    char *big = calloc(1, n);
    ASSERT_ERR(distc_store_set(srv, "big", big, n), DISTC_ENOMEM, "max_request_bytes");
    round_trip(srv, "small");
    free(big);
    distc_store_free(srv);
}

static void test_options(void **state) {
    (void)state;
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.is_server = 1;
    o.allow_torch_clients = 2;
    distc_store *s = NULL;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EINVAL, "opts->allow_torch_clients");
    /* A version-2 struct ends before the token: init leaves it alone, the server takes the environment's. */
    distc_tcp_store_options v2;
    memset(&v2, 0x55, sizeof v2);
    ASSERT_OK(distc_tcp_store_options_init(&v2, 2));
    assert_int_equal(v2.max_request_bytes, -1);
    assert_int_equal(v2.allow_torch_clients, 0x55555555);
    ASSERT_OK(distc_tcp_store_options_init(&o, DISTC_TCP_STORE_OPTIONS_VERSION));
    assert_null(o.token);
    assert_int_equal(o.allow_torch_clients, -1);
    assert_null(o.server_log);
}

int main(void) {
    unsetenv("DISTC_STORE_TOKEN"); /* the tests say which token each side has */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_right_token),
        cmocka_unit_test(test_wrong_token),
        cmocka_unit_test(test_no_token),
        cmocka_unit_test(test_token_from_environment),
        cmocka_unit_test(test_torch_clients),
        cmocka_unit_test(test_unauthenticated_requests),
        cmocka_unit_test(test_client_knows_the_request_limit),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
