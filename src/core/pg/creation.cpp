// Creating a group: its key space in the store (one instance per attempt of
// each rank), its backend (the built-in host backend, or an engine's),
// and the step in which every rank learns that all succeeded.
#include <cstdlib>
#include <cstring>

#include "core/pg/process_group.hpp"
#include "core/store/prefix_store.hpp"
#include "core/store/watchful_store.hpp"
#include "core/util/debug.hpp"
#include "core/util/error.hpp"

namespace distc {

ProcessGroup::ProcessGroup(std::shared_ptr<Store> store, int rank, int size, const PgOptions &opts,
                           std::vector<int> global_ranks, const MakeAsync &make) :
    root_store_(std::move(store)),
    rank_(rank), size_(size), name_(opts.name.empty() ? "default_pg" : opts.name),
    key_space_(opts.key_space.empty() ? name_ : opts.key_space), timeout_(opts.timeout),
    global_ranks_(std::move(global_ranks)), private_store_(opts.private_store) {
    if (size < 1) fail(DISTC_EINVAL, "size is " + std::to_string(size) + ", must be >= 1");
    if (rank < 0 || rank >= size)
        fail(DISTC_EINVAL, "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(size - 1));
    if (opts.debug >= 0) {
        debug_ = opts.debug > 0;
    } else {
        debug_ = debug_level() == DebugLevel::Detail;
    }
    // Each rank counts its own attempts at a group of this name, and its k-th
    // attempt meets every other rank's k-th in instance k's key space. A rank
    // that fails fast and retries at once then still meets its peers' retry,
    // not their first try (a shared counter would pair attempts by arrival).
    // A failure on any rank fails the attempt on all (below), so every rank
    // has made the same number of attempts when it tries again.
    int64_t n = root_store_->add(key_space_ + "/attempts/" + std::to_string(rank), 1);
    std::string instance = key_space_ + "/" + std::to_string(n - 1);
    prefix_ = instance + "/";
    store_ = std::make_shared<PrefixStore>(instance, root_store_);
    // Backends rendezvous through a store that gives up when a peer announces
    // it failed: no rank waits out the timeout for a peer that is gone.
    auto watchful = std::make_shared<WatchfulStore>(store_, kCreationFailed, "creating group '" + name_ + "'");
    try {
        connect(opts, make, watchful, instance);
        if (!private_store_) agree_created(*watchful);
    } catch (const std::exception &e) {
        try {  // the first reason stays: peers name the rank that failed first
            std::string why = "rank " + std::to_string(rank_) + ": " + e.what();
            // Briefly: when the store is what failed, this error is not to wait out a second timeout.
            store_->compare_set_within(kCreationFailed, ByteView(), ByteView(why.data(), why.size()), Millis(500));
        } catch (const std::exception &) {
            // The store itself is gone: peers learn it from their own calls.
        }
        throw;
    }
    watchful->stop_watching();
    trace_ = TraceRecorder::make(name_, rank_, size_, global_ranks_, backend_->name());
}

void ProcessGroup::connect(const PgOptions &opts, const MakeAsync &make, const std::shared_ptr<Store> &store,
                           const std::string &instance) {
    AsyncGroupInfo info{store, rank_, size_, timeout_, instance, {}, opts.device};
    for (int r = 0; r < size_; ++r) info.global_ranks.push_back(global_rank(r));
    if (make)
        backend_ = make(info);
    else if (opts.backend == "gloo")
        backend_ = make_host_backend(info, debug_);
    else
        backend_ = make_async_backend(opts.backend, info);
    device_types_ = backend_->device_types();
    stream_ordered_ = backend_->stream_ordered();
    // The host backend checks its calls itself.
    if (debug_ && std::strcmp(backend_->name(), "gloo") != 0) check_ = CallCheck::make(info, *backend_, private_store_);
}

void ProcessGroup::agree_created(Store &store) {
    // A backend may finish its part without hearing from every peer: each
    // rank says it is done and waits for all, so no rank keeps a group whose
    // creation failed elsewhere.
    store.set("created/" + std::to_string(rank_), ByteView("1", 1));
    std::vector<std::string> all;
    for (int r = 0; r < size_; ++r) all.push_back("created/" + std::to_string(r));
    store.wait(all, timeout_);
    // Every rank has now read what it needs of its peers' addresses: the last
    // one here removes them all, so a freed group leaves only its name's
    // attempt counters (one per rank) in the store. The names are the host
    // backend's (its TCP and shared-memory transports' and Gloo's rendezvous';
    // test_pg_groups counts what is left); other backends keep their own keys.
    try {
        if (store.add("connected", 1) < size_) return;
        for (const char *space : {"", "debug/"}) {  // debug/: the host group of debug mode's CallCheck
            if (*space && !(check_ && check_->own_group())) continue;
            for (int r = 0; r < size_; ++r)
                for (const std::string &k :
                     {"created/" + std::to_string(r), "mesh/" + std::to_string(r), std::to_string(r),
                      "rank_" + std::to_string(r), "shm/host/" + std::to_string(r), "shm/ok/" + std::to_string(r),
                      "shm/" + std::to_string(r) + "/seg", "shm/" + std::to_string(r) + "/fail",
                      "net/" + std::to_string(r)})
                    store.delete_key(space + k);
        }
        store.delete_key("connected");
    } catch (const Error &) {
        // A store that fails now leaves the keys behind; the group itself is connected and works.
    }
}

}  // namespace distc
