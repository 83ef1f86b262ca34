// Subgroups: c10d's new_group and MPI_Comm_split.
#include <algorithm>
#include <cstring>
#include <set>

#include "core/pg/process_group.hpp"
#include "core/util/error.hpp"

namespace distc {

std::shared_ptr<ProcessGroup> ProcessGroup::new_subgroup(const std::vector<int> &ranks, PgOptions opts) {
    if (ranks.empty()) fail(DISTC_EINVAL, "ranks is empty");
    std::set<int> seen;
    for (size_t i = 0; i < ranks.size(); ++i) {
        int r = ranks[i];
        if (r < 0 || r >= size_)
            fail(DISTC_EINVAL, "ranks[" + std::to_string(i) + "] = " + std::to_string(r) + " is outside 0.." +
                                   std::to_string(size_ - 1));
        if (!seen.insert(r).second) fail(DISTC_EINVAL, "rank " + std::to_string(r) + " is listed twice");
    }
    // Every parent rank counts creations, so all agree on the name without talking.
    uint64_t n = ++subgroups_;
    inherit(opts);
    if (opts.name.empty()) opts.name = name_ + "/sub" + std::to_string(n);
    opts.key_space = key_space_ + "/sub" + std::to_string(n);
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    int index = it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
    opts.backend = backend_->name();
    // An engine that splits (ncclCommSplit) needs every parent rank in the call.
    if (index < 0) {
        engine_split(-1, 0, opts);
        return nullptr;
    }
    std::vector<int> global;
    for (int r : ranks) global.push_back(global_rank(r));
    return std::make_shared<ProcessGroup>(root_store_, index, static_cast<int>(ranks.size()), opts, std::move(global),
                                          engine_split(0, index, opts));
}

void ProcessGroup::inherit(PgOptions &opts) const {
    opts.private_store = private_store_;
    if (opts.debug < 0) opts.debug = debug_ ? 1 : 0;
}

ProcessGroup::MakeAsync ProcessGroup::engine_split(int color, int key, const PgOptions &opts) {
    if (color < 0) {
        bool made = false;
        backend_->split(-1, key, AsyncGroupInfo{}, made);
        return nullptr;
    }
    std::string backend = opts.backend;
    bool debug = opts.debug > 0;
    return [this, color, key, backend, debug](const AsyncGroupInfo &info) {
        bool made = false;
        auto b = backend_->split(color, key, info, made);
        if (made) return b;
        return backend == "gloo" ? make_host_backend(info, debug) : make_async_backend(backend, info);
    };
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key, PgOptions opts) {
    if (color < -1) fail(DISTC_EINVAL, "color is " + std::to_string(color) + ", must be >= 0 or DISTC_SPLIT_NOCOLOR");
    // Everyone learns everyone's (color, key) through the parent, as MPI does.
    int32_t mine[2] = {color, key};
    Scratch all(DType::Int32, 2 * static_cast<size_t>(size_));
    auto v = all_gather_bytes(ByteView(reinterpret_cast<const uint8_t *>(mine), sizeof mine), OpOptions{});
    for (size_t r = 0; r < v.size(); ++r) {
        if (v[r].size() != sizeof mine)
            fail(DISTC_EPROTO, "rank " + std::to_string(r) + " sent a malformed split request");
        std::memcpy(all.t.bytes() + r * sizeof mine, v[r].data(), sizeof mine);
    }
    opts.backend = backend_->name();
    return split_members(color, key, opts, all);
}

std::shared_ptr<ProcessGroup> ProcessGroup::split_members(int color, int key, PgOptions opts, const Scratch &all) {
    uint64_t n = ++subgroups_;
    inherit(opts);
    if (color < 0) {
        engine_split(-1, key, opts);
        return nullptr;
    }
    auto *v = reinterpret_cast<const int32_t *>(all.t.data);
    std::vector<std::pair<int, int>> members;  // (key, parent rank)
    for (int r = 0; r < size_; ++r)
        if (v[2 * r] == color) members.emplace_back(v[2 * r + 1], r);
    std::sort(members.begin(), members.end());
    std::vector<int> global;
    int my_rank = -1;
    for (size_t i = 0; i < members.size(); ++i) {
        if (members[i].second == rank_) my_rank = static_cast<int>(i);
        global.push_back(global_rank(members[i].second));
    }
    const std::string derived = "/split" + std::to_string(n) + "/color" + std::to_string(color);
    if (opts.name.empty() || opts.name == "default_pg") opts.name = name_ + derived;
    opts.key_space = key_space_ + derived;
    return std::make_shared<ProcessGroup>(root_store_, my_rank, static_cast<int>(members.size()), opts,
                                          std::move(global), engine_split(color, key, opts));
}

}  // namespace distc
