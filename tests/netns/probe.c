/* The round trip to a fake host, measured as TCP sees it, for the delay
 * and loss test (test_multihost.sh): a connection asked for on a port where
 * nothing listens is refused one round trip later. No ping is needed.
 *
 *   netns_probe ADDRESS MIN_MS
 *
 * Prints the median of 9 tries and exits 1 when it is under MIN_MS (the
 * delay the link was asked for is not there) or when no try was answered.
 * A try whose packet is lost (no answer within 500 ms) is left out. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: netns_probe ADDRESS MIN_MS\n");
        return 2;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai;
    if (getaddrinfo(argv[1], "9", &hints, &ai) != 0) {
        fprintf(stderr, "netns_probe: %s is not a numeric address\n", argv[1]);
        return 2;
    }
    double rtt[9];
    int n = 0;
    for (int i = 0; i < 9; i++) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) return 2;
        double t0 = now_ms();
        int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (r != 0 && errno == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (poll(&p, 1, 500) == 1) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err == ECONNREFUSED || err == 0) rtt[n++] = now_ms() - t0;
            }
        }
        close(fd);
    }
    freeaddrinfo(ai);
    if (n == 0) {
        printf("no answer from %s in 9 tries\n", argv[1]);
        return 1;
    }
    qsort(rtt, (size_t)n, sizeof rtt[0], cmp);
    double median = rtt[n / 2], min_ms = atof(argv[2]);
    printf("round trip to %s: %.2f ms (median of %d answered tries of 9; at least %.2f ms asked)\n", argv[1], median, n,
           min_ms);
    return median >= min_ms ? 0 : 1;
}
