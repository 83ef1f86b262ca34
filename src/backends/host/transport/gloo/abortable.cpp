#include "backends/host/transport/gloo/abortable.hpp"

#include <gloo/common/error.h>

namespace distc {

namespace {

[[noreturn]] void throw_aborted() { throw gloo::IoException("the group was aborted"); }

class AbortableBuffer final : public gloo::transport::UnboundBuffer {
public:
    AbortableBuffer(std::unique_ptr<gloo::transport::UnboundBuffer> inner, std::shared_ptr<AbortState> state) :
        UnboundBuffer(inner->ptr, inner->size), inner_(std::move(inner)), state_(std::move(state)) {
        state_->add(inner_.get());
    }
    ~AbortableBuffer() override { state_->remove(inner_.get()); }

    bool waitRecv(int *rank, std::chrono::milliseconds timeout) override {
        if (state_->aborted()) throw_aborted();
        bool ok = inner_->waitRecv(rank, timeout);
        if (state_->aborted()) throw_aborted();
        return ok;
    }
    bool waitSend(int *rank, std::chrono::milliseconds timeout) override {
        if (state_->aborted()) throw_aborted();
        bool ok = inner_->waitSend(rank, timeout);
        if (state_->aborted()) throw_aborted();
        return ok;
    }
    void abortWaitRecv() override { inner_->abortWaitRecv(); }
    void abortWaitSend() override { inner_->abortWaitSend(); }
    void send(int dst, uint64_t slot, size_t offset, size_t nbytes) override {
        if (state_->aborted()) throw_aborted();
        inner_->send(dst, slot, offset, nbytes);
    }
    void recv(int src, uint64_t slot, size_t offset, size_t nbytes) override {
        if (state_->aborted()) throw_aborted();
        inner_->recv(src, slot, offset, nbytes);
    }
    void recv(std::vector<int> srcs, uint64_t slot, size_t offset, size_t nbytes) override {
        if (state_->aborted()) throw_aborted();
        inner_->recv(std::move(srcs), slot, offset, nbytes);
    }

private:
    std::unique_ptr<gloo::transport::UnboundBuffer> inner_;
    std::shared_ptr<AbortState> state_;
};

// Pairs live in the inner context (they refer to it for recv-from-any); this
// one only hands out their slots and wraps the buffers.
class AbortableContext final : public gloo::transport::Context {
public:
    AbortableContext(std::shared_ptr<gloo::transport::Context> inner, std::shared_ptr<AbortState> state) :
        Context(inner->rank, inner->size), inner_(std::move(inner)), state_(std::move(state)) {}
    std::unique_ptr<gloo::transport::Pair> &getPair(int rank) override { return inner_->getPair(rank); }
    std::unique_ptr<gloo::transport::Pair> &createPair(int rank) override { return inner_->createPair(rank); }
    std::unique_ptr<gloo::transport::UnboundBuffer> createUnboundBuffer(void *ptr, size_t size) override {
        return std::make_unique<AbortableBuffer>(inner_->createUnboundBuffer(ptr, size), state_);
    }

private:
    std::shared_ptr<gloo::transport::Context> inner_;
    std::shared_ptr<AbortState> state_;
};

}  // namespace

void AbortState::abort() {
    aborted_ = true;
    std::lock_guard<std::mutex> lk(mu_);
    for (auto *b : live_) {
        b->abortWaitRecv();
        b->abortWaitSend();
    }
}

void AbortState::add(gloo::transport::UnboundBuffer *b) {
    std::lock_guard<std::mutex> lk(mu_);
    live_.insert(b);
    // A buffer made after abort() must not wait either; its waits throw up front.
}

void AbortState::remove(gloo::transport::UnboundBuffer *b) {
    std::lock_guard<std::mutex> lk(mu_);
    live_.erase(b);
}

std::shared_ptr<gloo::transport::Context> AbortableDevice::createContext(int rank, int size) {
    auto inner = inner_->createContext(rank, size);
    // The rendezvous sets its timeout on the context it sees, which is ours; the pairs read the inner one.
    inner->setTimeout(timeout_);
    return std::make_shared<AbortableContext>(std::move(inner), state_);
}

}  // namespace distc
