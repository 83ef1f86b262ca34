// The launch path's parts off the blocking fast path (process_group.hpp has
// the rest): an asynchronous or stream-ordered call's Work, the wait for
// earlier asynchronous collectives, a blocking call its backend did not
// complete in time, and aborting.
#include <algorithm>

#include "core/pg/process_group.hpp"
#include "core/util/error.hpp"

namespace distc {

ProcessGroup::~ProcessGroup() = default;

const std::string ProcessGroup::kNoMessage;

void ProcessGroup::abort() {
    aborted_ = true;
    if (check_) check_->abort();
    backend_->abort();
    if (trace_) trace_->dump_on_failure();
}

void ProcessGroup::trace_dump(const std::string &path) const {
    if (!trace_) fail(DISTC_ENOTSUP, "the flight recorder is off (DISTC_TRACE_BUFFER=0)");
    TraceRecorder::write_file(path, {trace_});
}

void ProcessGroup::fail_aborted() const { fail(DISTC_EABORTED, "the group was aborted"); }

void ProcessGroup::fail_in_callback() const {
    // The group's collectives before this one wait for the callback to return.
    fail(DISTC_ESTATE,
         "a blocking collective cannot run in the completion callback of one of its group's collectives: issue "
         "it asynchronously and leave the callback, or call it from another thread");
}

void ProcessGroup::check_call(const OpInfo &info, const AsyncArgs &a, uint64_t traced) {
    AsyncArgs x = a;
    if (x.call.all_to_all()) x.call.count = info.digest;
    try {
        try {
            check_->check(x);
        } catch (const BlockingCallTimedOut &) {
            abort_timed_out(info, a);
        }
    } catch (const Error &e) {
        if (traced) trace_->finished(traced, e.code(), e.what());
        throw;
    }
}

void ProcessGroup::wait_outstanding(Millis timeout) {
    // Results come in issue order: earlier asynchronous collectives finish first.
    std::vector<std::weak_ptr<Work>> earlier;
    {
        std::lock_guard<std::mutex> lk(mu_);
        earlier.swap(outstanding_);
        outstanding_count_ = 0;
    }
    for (auto &e : earlier)
        if (auto p = e.lock()) p->wait(timeout + Millis(2000));
}

void ProcessGroup::abort_timed_out(const OpInfo &info, const AsyncArgs &a) {
    backend_->abort();
    aborted_ = true;
    fail(DISTC_ETIMEOUT, describe_op(info.kind, a.seq, info.label) + ": the " + backend_->name() +
                             " backend did not complete it within " + std::to_string(a.timeout.count()) +
                             " ms; the group was aborted");
}

ProcessGroup::WorkPtr ProcessGroup::launch_work(const OpInfo &info, const AsyncArgs &a, bool host_ordered, Start start,
                                                uint64_t traced) {
    auto w = std::make_shared<Work>(a.seq, info.kind, info.label);
    if (!info.p2p) w->set_runner(this);
    if (traced) w->trace_to(trace_, traced);
    if (!a.blocking) w->start();  // a blocking call's duration is nobody's to read
    start(w, a);
    if (host_ordered) {
        std::lock_guard<std::mutex> lk(mu_);
        outstanding_.erase(std::remove_if(outstanding_.begin(), outstanding_.end(),
                                          [](const std::weak_ptr<Work> &x) {
                                              auto p = x.lock();
                                              return !p || p->done();
                                          }),
                           outstanding_.end());
        outstanding_.push_back(w);
        outstanding_count_ = outstanding_.size();
    }
    // A device launch that already failed is reported now, as a blocking call must.
    if (a.blocking && w->done() && w->status() != 0) fail(w->status(), w->message());
    return w;
}

}  // namespace distc
