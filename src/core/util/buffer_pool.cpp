#include "core/util/buffer_pool.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

namespace distc {

namespace {

struct Pool {
    std::mutex mu;
    std::vector<PooledBytes> kept;  // at most a few: sorted by nothing, searched for the smallest that fits
    size_t bytes = 0;
};

Pool &pool() {
    static Pool *p = new Pool;  // never destroyed: buffers may come back from static destructors
    return *p;
}

}  // namespace

PooledBytes pool_take(size_t n) {
    if (n >= kPoolMinBytes) {
        Pool &p = pool();
        std::lock_guard<std::mutex> lock(p.mu);
        auto best = p.kept.end();
        for (auto it = p.kept.begin(); it != p.kept.end(); ++it)
            if (it->cap >= n && (best == p.kept.end() || it->cap < best->cap)) best = it;
        if (best != p.kept.end()) {
            PooledBytes b = std::move(*best);
            p.kept.erase(best);
            p.bytes -= b.cap;
            return b;
        }
    }
    return PooledBytes{std::unique_ptr<uint8_t[]>(new uint8_t[n]), n};
}

void pool_give(PooledBytes b) noexcept {
    if (!b.p || b.cap < kPoolMinBytes || b.cap > kPoolKeepBytes) return;
    Pool &p = pool();
    std::lock_guard<std::mutex> lock(p.mu);
    // Room by dropping the smallest kept ones, if this one is larger.
    while (p.bytes + b.cap > kPoolKeepBytes && !p.kept.empty()) {
        auto small = std::min_element(p.kept.begin(), p.kept.end(),
                                      [](const PooledBytes &x, const PooledBytes &y) { return x.cap < y.cap; });
        if (small->cap >= b.cap) return;  // b is the smallest: it goes instead
        p.bytes -= small->cap;
        p.kept.erase(small);
    }
    try {
        p.kept.push_back(std::move(b));
        p.bytes += p.kept.back().cap;
    } catch (...) {  // no room for the entry: b goes
    }
}

}  // namespace distc
