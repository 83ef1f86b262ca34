// mostly_on_huge_pages against what /proc/self/smaps says of the same
// mapping: memory advised as transparent huge pages (huge where the host
// gives them), memory advised against them, nothing mapped, and a child
// forked after the query, which must ask about its own pages; and answers
// given again, which go stale for a bounded number of asks only.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

// Before cmocka, whose fail() macro would rewrite the library's fail().
#include "core/util/huge_pages.hpp"

#include <cstdarg>
#include <cstddef>
#include <csetjmp>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

namespace {

constexpr size_t kHuge = size_t(2) << 20, kBytes = 4 * kHuge;

// kBytes on a 2 MiB boundary inside a larger mapping, its first half
// advised `first` and its second `second`: mappings of their own (their
// flags differ from their neighbours'), touched.
uint8_t *advised(int first, int second) {
    void *m = mmap(nullptr, kBytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    auto *p = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(m) + kHuge - 1) / kHuge * kHuge);
    assert_int_equal(madvise(p, kBytes / 2, first), 0);
    assert_int_equal(madvise(p + kBytes / 2, kBytes / 2, second), 0);
    std::memset(p, 1, kBytes);
    return p;
}
uint8_t *advised(int advice) { return advised(advice, advice); }

// The kB of huge pages smaps counts in the mapping that holds `p`.
long smaps_huge_kb(const void *p) {
    std::FILE *f = std::fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    char line[512];
    bool in = false;
    long kb = -1;
    const auto at = reinterpret_cast<uintptr_t>(p);
    while (std::fgets(line, sizeof line, f)) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && std::strchr(line, '-') < std::strchr(line, ' ')) {
            in = lo <= at && at < hi;
            continue;
        }
        if (in && std::sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    }
    std::fclose(f);
    return kb;
}

void test_agrees_with_smaps(void **) {
    uint8_t *huge = advised(MADV_HUGEPAGE), *small = advised(MADV_NOHUGEPAGE);
    const long huge_kb = smaps_huge_kb(huge);
    assert_true(huge_kb >= 0);
    // The host decides whether it gives huge pages (THP "never", or memory
    // too fragmented): whatever it gave, the query says the same.
    assert_int_equal(distc::mostly_on_huge_pages(huge, kBytes), huge_kb * 1024 >= long(kBytes / 4 * 3));
    std::printf("huge pages here: %ld of %zu kB advised\n", huge_kb, kBytes / 1024);
    assert_int_equal(smaps_huge_kb(small), 0);
    assert_false(distc::mostly_on_huge_pages(small, kBytes));
    // Half of a range on small pages: not mostly huge, whatever the other half.
    uint8_t *mixed = advised(MADV_HUGEPAGE, MADV_NOHUGEPAGE);
    assert_int_equal(distc::mostly_on_huge_pages(mixed, kBytes / 2),
                     smaps_huge_kb(mixed) * 1024 >= long(kBytes / 2 / 4 * 3));
    assert_false(distc::mostly_on_huge_pages(mixed, kBytes));
    // Nothing mapped, and nothing at all.
    void *gone = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(gone != MAP_FAILED);
    munmap(gone, kBytes);
    assert_false(distc::mostly_on_huge_pages(gone, kBytes));
    assert_false(distc::mostly_on_huge_pages(nullptr, kBytes));
    assert_false(distc::mostly_on_huge_pages(huge, 0));
}

// A child forked after the parent asked replaces the huge range with small
// pages at the same address: asked there, it must answer for itself.
void test_child_asks_about_its_own_pages(void **) {
    uint8_t *huge = advised(MADV_HUGEPAGE);
    if (!distc::mostly_on_huge_pages(huge, kBytes)) skip();  // no huge pages on this host: nothing to tell apart
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        void *m = mmap(huge, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (m != huge || madvise(huge, kBytes, MADV_NOHUGEPAGE) != 0) _exit(2);
        std::memset(huge, 1, kBytes);
        _exit(distc::mostly_on_huge_pages(huge, kBytes) ? 1 : 0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(distc::mostly_on_huge_pages(huge, kBytes));  // the parent's own, still
}

// Asked again, a range may get the last answer, but not for more than 64
// asks: memory remapped to small pages at the same address shows by then.
void test_answers_go_stale_boundedly(void **) {
    uint8_t *huge = advised(MADV_HUGEPAGE);
    if (!distc::mostly_on_huge_pages(huge, kBytes)) skip();
    void *m = mmap(huge, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    assert_ptr_equal(m, huge);
    assert_int_equal(madvise(huge, kBytes, MADV_NOHUGEPAGE), 0);
    std::memset(huge, 1, kBytes);
    int asks = 1;
    while (distc::mostly_on_huge_pages(huge, kBytes) && asks <= 100) ++asks;
    std::printf("remapped to small pages: seen at ask %d\n", asks);
    assert_true(asks <= 65);
}

}  // namespace

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_agrees_with_smaps),
        cmocka_unit_test(test_child_asks_about_its_own_pages),
        cmocka_unit_test(test_answers_go_stale_boundedly),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
