// Shared memory from distc_mem_alloc as a peer process sees it (PeerMemory):
// a child process allocates regions and a parent maps them from what the
// child published, reads and writes them where they lie, and is refused
// everything that does not match (a wrong id, base or file descriptor, a
// file that is not a region, a region since freed); a freed region is
// unmapped at the next attach. And the allocator's own checks, and its
// failures where the process may not have another file, a file that large,
// or more address space.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

// Before cmocka, whose fail() macro would rewrite the library's fail().
#include "backends/host/transport/shm/peer_memory.hpp"
#include "core/util/error.hpp"
#include "core/util/shared_memory.hpp"

#include <cstdarg>
#include <cstddef>
#include <csetjmp>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

using distc::PeerBuffer;
using distc::PeerMemory;

namespace {

// What the child says and is told, in memory both map (MAP_SHARED before fork).
struct Channel {
    volatile int step;  // the parent's request; the child answers by setting `done` to it
    volatile int done;
    PeerBuffer bufs[3];
    int other_fd;  // a plain file the child holds open
};

void wait_for(volatile int &v, int want) {
    for (int i = 0; v != want && i < 2000000; ++i) usleep(5);
    assert_int_equal(v, want);
}

// The child: two regions (the first filled with its index bytes), a plain
// file; then frees the first region when asked (step 2), and exits (step 3).
[[noreturn]] void child(Channel *c) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a parent that fails an assertion leaves no child behind
    if (getppid() == 1) _exit(1);
    const size_t n = 3 * 4096 + 100;
    auto *a = static_cast<uint8_t *>(distc::shared_alloc(n));
    auto *b = static_cast<uint8_t *>(distc::shared_alloc(4096));
    for (size_t i = 0; i < n; ++i) a[i] = static_cast<uint8_t>(i * 7);
    c->bufs[0] = distc::peer_buffer(a + 100, 5000);
    c->bufs[1] = distc::peer_buffer(b, 4096);
    c->bufs[2] = distc::peer_buffer(&c, sizeof c);  // not in a region
    char path[] = "/tmp/distc-peer-memory-XXXXXX";
    c->other_fd = mkstemp(path);
    if (c->other_fd >= 0) {
        unlink(path);
        if (ftruncate(c->other_fd, 3 * 4096) != 0) c->other_fd = -1;
    }
    c->done = 1;
    while (c->step != 2) usleep(5);
    // What the parent wrote through its mapping is here.
    const bool seen = a[100] == 0xAB && a[5099] == 0xCD;
    distc::shared_free(a);
    c->done = seen ? 2 : -2;
    while (c->step != 3) usleep(5);
    _exit(0);
}

void test_maps_a_peers_region(void **) {
    auto *c = static_cast<Channel *>(
        mmap(nullptr, sizeof(Channel), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    assert_true(c != MAP_FAILED);
    new (c) Channel{};
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) child(c);
    wait_for(c->done, 1);
    const PeerBuffer a = c->bufs[0], b = c->bufs[1];
    assert_int_not_equal(a.region, 0);
    assert_int_not_equal(b.region, 0);
    assert_int_equal(c->bufs[2].region, 0);
    assert_int_equal(a.addr, a.region_base + 100);

    // Peer 0 is this process (never used); peer 1 is the child.
    PeerMemory mem({getpid(), pid});
    mem.attach(1, a);
    assert_int_equal(mem.mapped(), 1);
    uint8_t *v = mem.view(1, a.addr, 5000);
    assert_non_null(v);
    for (size_t i = 0; i < 5000; ++i) assert_int_equal(v[i], static_cast<uint8_t>((i + 100) * 7));
    // The whole region, and not a byte past it.
    assert_non_null(mem.view(1, a.region_base, 3 * 4096 + 100));
    assert_null(mem.view(1, a.region_base, 3 * 4096 + 101));
    assert_null(mem.view(1, a.region_base - 1, 2));
    assert_null(mem.view(1, a.region_base + 3 * 4096 + 100, 1));
    // Only the last attach's region: the other one is mapped now, this one kept.
    mem.attach(1, b);
    assert_int_equal(mem.mapped(), 2);
    assert_null(mem.view(1, a.addr, 1));
    assert_non_null(mem.view(1, b.addr, 4096));
    mem.attach(1, a);  // from what was kept
    assert_int_equal(mem.mapped(), 2);
    v = mem.view(1, a.addr, 5000);
    assert_non_null(v);
    v[0] = 0xAB;
    v[4999] = 0xCD;

    // A buffer in no region, a wrong id, a wrong base, a descriptor of no
    // region or of nothing: no view, and nothing more mapped.
    mem.attach(1, c->bufs[2]);
    assert_null(mem.view(1, c->bufs[2].addr, 1));
    PeerBuffer wrong = a;
    wrong.region += 1000;
    mem.attach(1, wrong);
    assert_null(mem.view(1, a.addr, 1));
    wrong = a;
    wrong.region_base += 4096;
    mem.attach(1, wrong);
    assert_null(mem.view(1, a.addr + 4096, 1));
    wrong = a;
    wrong.region = 999;
    wrong.region_fd = c->other_fd;
    mem.attach(1, wrong);
    assert_null(mem.view(1, a.addr, 1));
    wrong.region = 998;
    wrong.region_fd = 1 << 20;
    mem.attach(1, wrong);
    wrong.region = 997;
    wrong.region_fd = -5;
    mem.attach(1, wrong);
    assert_null(mem.view(1, a.addr, 1));
    assert_int_equal(mem.mapped(), 2);

    // The child frees the first region: no view of it any more, and the next
    // attach unmaps it.
    mem.attach(1, a);
    assert_non_null(mem.view(1, a.addr, 1));
    c->step = 2;
    wait_for(c->done, 2);
    assert_null(mem.view(1, a.addr, 1));
    mem.attach(1, b);
    assert_int_equal(mem.mapped(), 1);
    mem.attach(1, a);  // named again after its free: not mapped again
    assert_null(mem.view(1, a.addr, 1));
    assert_int_equal(mem.mapped(), 1);
    c->step = 3;
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    munmap(c, sizeof *c);
}

void test_keeps_at_most_k_per_peer(void **) {
    // This process's own regions, seen as a peer's (peer 1 is this process
    // here: PeerMemory maps through /proc/<pid>/fd all the same).
    PeerMemory mem({getpid(), getpid()});
    std::vector<void *> regions;
    for (size_t i = 0; i < PeerMemory::kKeep + 4; ++i) {
        regions.push_back(distc::shared_alloc(4096));
        mem.attach(1, distc::peer_buffer(regions.back(), 4096));
        assert_non_null(mem.view(1, reinterpret_cast<uintptr_t>(regions.back()), 4096));
        assert_true(mem.mapped() <= PeerMemory::kKeep);
    }
    // The last one named is mapped to the same memory.
    auto *last = static_cast<uint8_t *>(regions.back());
    last[7] = 42;
    assert_int_equal(mem.view(1, reinterpret_cast<uintptr_t>(last), 4096)[7], 42);
    for (void *p : regions) distc::shared_free(p);
}

void test_allocator_checks(void **) {
    auto code = [](auto &&f) {
        try {
            f();
        } catch (const distc::Error &e) {
            return e.code();
        }
        return 0;
    };
    assert_int_equal(code([] { distc::shared_alloc(0); }), DISTC_EINVAL);
    assert_int_equal(code([] { distc::shared_alloc(SIZE_MAX); }), DISTC_EINVAL);
    auto *p = static_cast<uint8_t *>(distc::shared_alloc(10000));
    assert_int_equal(reinterpret_cast<uintptr_t>(p) % 4096, 0);
    for (size_t i = 0; i < 10000; ++i) assert_int_equal(p[i], 0);  // zeroed
    // Found from any byte inside, not past its end.
    assert_int_not_equal(distc::shared_region_of(p + 9999, 1).id, 0);
    assert_int_equal(distc::shared_region_of(p + 9999, 2).id, 0);
    assert_int_equal(distc::shared_region_of(p - 1, 1).id, 0);
    int x = 0;
    assert_int_equal(distc::shared_region_of(&x, sizeof x).id, 0);
    assert_int_equal(code([&] { distc::shared_free(p + 1); }), DISTC_EINVAL);
    assert_int_equal(code([&] { distc::shared_free(&x); }), DISTC_EINVAL);
    assert_int_equal(code([&] { distc::shared_free(p); }), 0);
    assert_int_equal(code([&] { distc::shared_free(p); }), DISTC_EINVAL);  // twice
    assert_int_equal(distc::shared_region_of(p, 1).id, 0);
    assert_int_equal(code([] { distc::shared_free(nullptr); }), 0);
}

// In a child, so the limits stay there: each way the allocator fails
// gives its code and says which step failed. Exit 0: all as expected.
int failures_in_child() {
    auto fails = [](size_t bytes, int want, const char *step) {
        try {
            distc::shared_free(distc::shared_alloc(bytes));
        } catch (const distc::Error &e) {
            return e.code() == want && std::strstr(e.what(), step) != nullptr;
        }
        return false;
    };
    rlimit old{};
    getrlimit(RLIMIT_NOFILE, &old);
    const int lowest = dup(0);  // the descriptor the next one would get
    close(lowest);
    rlimit files = old;
    files.rlim_cur = static_cast<rlim_t>(lowest);
    if (setrlimit(RLIMIT_NOFILE, &files) != 0 || !fails(4096, DISTC_ENOMEM, "memfd_create")) return 1;
    if (setrlimit(RLIMIT_NOFILE, &old) != 0) return 2;
    signal(SIGXFSZ, SIG_IGN);  // ftruncate past the limit fails with EFBIG instead
    rlimit size{};
    getrlimit(RLIMIT_FSIZE, &size);
    rlimit small{1 << 20, size.rlim_max};  // the soft limit only: it goes back up
    if (setrlimit(RLIMIT_FSIZE, &small) != 0 || !fails(8 << 20, DISTC_ENOMEM, "ftruncate")) return 3;
    if (setrlimit(RLIMIT_FSIZE, &size) != 0) return 6;
    // Address space: what the process has now plus a little, less than the region.
    std::FILE *f = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || std::fscanf(f, "%lu", &pages) != 1) return 4;
    std::fclose(f);
    const rlim_t now = static_cast<rlim_t>(pages) * 4096 + (64 << 20);
    rlimit as{};
    getrlimit(RLIMIT_AS, &as);
    as.rlim_cur = now;
    if (setrlimit(RLIMIT_AS, &as) != 0 || !fails(256 << 20, DISTC_ENOMEM, "mmap")) return 5;
    return 0;
}

void test_allocator_failures(void **) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(failures_in_child());
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);  // else the number of the check that failed
}

}  // namespace

int main() {
    signal(SIGPIPE, SIG_IGN);
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_maps_a_peers_region),
        cmocka_unit_test(test_keeps_at_most_k_per_peer),
        cmocka_unit_test(test_allocator_checks),
        cmocka_unit_test(test_allocator_failures),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
