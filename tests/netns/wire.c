/* A switch with delay and loss, in user space, for the fake hosts
 * (hosts.sh) on kernels built without tc's netem.
 *
 *   netns_wire [--delay-us US] [--loss PERCENT] [--seed N] [--offload] TAP...
 *
 * Makes one TAP device per name, says "ready" on standard output once they
 * exist (the caller then moves each into its host's namespace), and from
 * then on switches Ethernet frames between them as a learning switch does:
 * each frame is dropped with probability PERCENT/100, or else held for US
 * microseconds and written to the port its destination was last seen on
 * (every other port when unknown or broadcast). Delay is per frame and
 * constant, so each port's queue stays in arrival order; a port whose queue
 * is full drops at its tail, as a real switch does. Without --offload the
 * devices hand over wire-sized frames, so TCP above sees real delay and
 * per-packet loss and recovers by itself. --offload lets the hosts' stacks
 * pass segments of up to 64 KiB with their checksums left to the receiver
 * (virtio-net headers, as a VM's NIC), which moves far more per system
 * call: for measuring over a delayed link, where a lost segment would be a
 * burst of packets. Ends on SIGTERM or SIGINT, printing what it forwarded,
 * lost and dropped to standard error. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

enum { kMaxPorts = 16, kQueue = 2048, kFrames = 4096, kMacs = 256 };
enum { kVnetHdr = 10 }; /* struct virtio_net_hdr, before each frame with --offload */
enum { kMaxFrame = kVnetHdr + 65536 + 14 };

struct frame {
    int64_t due_ns;
    uint32_t len;
    unsigned char data[kMaxFrame];
};

struct port {
    int fd;
    struct frame *queue[kQueue]; /* a ring of frames waiting to go out */
    unsigned head, count;
};

static struct port ports[kMaxPorts];
static int nports;
static struct frame *pool[kFrames]; /* free frames */
static int npool;
static struct {
    unsigned char mac[6];
    int port;
} macs[kMacs];
static int nmacs;
static size_t hdr; /* bytes before the Ethernet frame: 0, or kVnetHdr with --offload */
static uint64_t forwarded, lost, dropped;
static volatile sig_atomic_t stopping;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static double uniform(void) { /* xorshift64: reproducible with --seed */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / (double)(1ull << 53);
}

static int open_tap(const char *name, int offload) {
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0);
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
    unsigned flags = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
    if (ioctl(fd, TUNSETIFF, &ifr) != 0 || (offload && ioctl(fd, TUNSETOFFLOAD, flags) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The port a source address was last seen on is where it lives. */
static void learn(const unsigned char *src, int port) {
    if (src[0] & 1) return; /* a group address is never a source */
    for (int i = 0; i < nmacs; i++)
        if (memcmp(macs[i].mac, src, 6) == 0) {
            macs[i].port = port;
            return;
        }
    int slot = nmacs < kMacs ? nmacs++ : (int)(uniform() * kMacs) % kMacs;
    memcpy(macs[slot].mac, src, 6);
    macs[slot].port = port;
}

static int lookup(const unsigned char *dst) {
    if (dst[0] & 1) return -1;
    for (int i = 0; i < nmacs; i++)
        if (memcmp(macs[i].mac, dst, 6) == 0) return macs[i].port;
    return -1;
}

static struct frame *take(void) { return npool ? pool[--npool] : NULL; }
static void give(struct frame *f) { pool[npool++] = f; }

static void enqueue(int to, struct frame *f) {
    struct port *p = &ports[to];
    if (p->count == kQueue) {
        dropped++;
        give(f);
        return;
    }
    p->queue[(p->head + p->count) % kQueue] = f;
    p->count++;
}

static void receive(int from, int64_t delay_ns, double loss) {
    for (;;) {
        struct frame *f = take();
        if (!f) return; /* every frame is queued: the ports' queues are full */
        ssize_t n = read(ports[from].fd, f->data, sizeof f->data);
        if (n < (ssize_t)(hdr + 14)) {
            give(f);
            if (n < 0 && errno != EINTR) return; /* EAGAIN: nothing more now */
            continue;
        }
        const unsigned char *eth = f->data + hdr;
        learn(eth + 6, from);
        if (loss > 0 && uniform() < loss) {
            lost++;
            give(f);
            continue;
        }
        f->len = (uint32_t)n;
        f->due_ns = now_ns() + delay_ns;
        int to = lookup(eth);
        if (to == from) {
            give(f);
        } else if (to >= 0) {
            enqueue(to, f);
        } else { /* flood: a copy for each other port */
            for (int i = 0; i < nports; i++) {
                if (i == from) continue;
                struct frame *c = take();
                if (!c) break;
                memcpy(c, f, offsetof(struct frame, data) + f->len);
                enqueue(i, c);
            }
            give(f);
        }
    }
}

/* Writes what is due; returns when the next frame is due (INT64_MAX: none). */
static int64_t deliver(void) {
    int64_t now = now_ns(), next = INT64_MAX;
    for (int i = 0; i < nports; i++) {
        struct port *p = &ports[i];
        while (p->count) {
            struct frame *f = p->queue[p->head];
            if (f->due_ns > now) {
                if (f->due_ns < next) next = f->due_ns;
                break;
            }
            if (write(p->fd, f->data, f->len) == (ssize_t)f->len)
                forwarded++;
            else
                dropped++; /* the host's device is down or full: lost on the wire */
            give(f);
            p->head = (p->head + 1) % kQueue;
            p->count--;
        }
    }
    return next;
}

static void on_signal(int sig) {
    (void)sig;
    stopping = 1;
}

static int usage(void) {
    fprintf(stderr, "usage: netns_wire [--delay-us US] [--loss PERCENT] [--seed N] [--offload] TAP...\n");
    return 2;
}

int main(int argc, char **argv) {
    double delay_us = 0, loss_percent = 0;
    int offload = 0, i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--offload") == 0) {
            offload = 1;
            i--;
            continue;
        }
        if (i + 1 >= argc) return usage();
        char *end;
        double v = strtod(argv[i + 1], &end);
        if (*end || v < 0) return usage();
        if (strcmp(argv[i], "--delay-us") == 0)
            delay_us = v;
        else if (strcmp(argv[i], "--loss") == 0 && v <= 100)
            loss_percent = v;
        else if (strcmp(argv[i], "--seed") == 0)
            rng = (uint64_t)v * 2654435761u + 1;
        else
            return usage();
    }
    if (argc - i < 2 || argc - i > kMaxPorts) return usage();
    hdr = offload ? kVnetHdr : 0;
    for (; i < argc; i++) {
        ports[nports].fd = open_tap(argv[i], offload);
        if (ports[nports].fd < 0) {
            fprintf(stderr, "netns_wire: cannot make TAP device %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        nports++;
    }
    /* Untouched pages cost nothing: only the frames in flight take memory. */
    for (npool = 0; npool < kFrames; npool++)
        if (!(pool[npool] = malloc(sizeof(struct frame)))) return 1;
    prctl(PR_SET_TIMERSLACK, 1UL); /* sleeps end when the next frame is due, not 50 us later */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    printf("ready\n");
    fflush(stdout);

    const int64_t delay_ns = (int64_t)(delay_us * 1000);
    const double loss = loss_percent / 100;
    struct pollfd fds[kMaxPorts];
    for (int k = 0; k < nports; k++) fds[k] = (struct pollfd){.fd = ports[k].fd, .events = POLLIN};
    while (!stopping) {
        int64_t next = deliver();
        struct timespec wait = {1, 0}, *timeout = &wait;
        if (next != INT64_MAX) {
            int64_t left = next - now_ns();
            if (left < 0) left = 0;
            wait.tv_sec = left / 1000000000;
            wait.tv_nsec = left % 1000000000;
        }
        int r = ppoll(fds, (nfds_t)nports, timeout, NULL);
        if (r < 0 && errno != EINTR) break;
        for (int k = 0; r > 0 && k < nports; k++)
            if (fds[k].revents & POLLIN) receive(k, delay_ns, loss);
    }
    fprintf(stderr,
            "netns_wire: forwarded %llu frames, lost %llu (loss %.2f%%), dropped %llu (a full queue or a device not "
            "up yet)\n",
            (unsigned long long)forwarded, (unsigned long long)lost, loss_percent, (unsigned long long)dropped);
    return 0;
}
