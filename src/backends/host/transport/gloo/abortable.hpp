// Makes Gloo operations abortable. Gloo waits for peers inside its algorithms
// on unbound buffers, and nothing public wakes those waits early except
// UnboundBuffer::abortWait*. So the group's transport device is wrapped:
// every unbound buffer Gloo creates goes through AbortableContext, which keeps
// a registry of live buffers; abort() wakes each of them, and a woken (or any
// later) wait throws instead of letting the algorithm carry on.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>

#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/unbound_buffer.h>

namespace distc {

class AbortState {
public:
    void abort();
    bool aborted() const { return aborted_.load(); }
    void add(gloo::transport::UnboundBuffer *b);
    void remove(gloo::transport::UnboundBuffer *b);

private:
    std::atomic<bool> aborted_{false};
    std::mutex mu_;
    std::set<gloo::transport::UnboundBuffer *> live_;  // the inner (real) buffers
};

class AbortableDevice final : public gloo::transport::Device {
public:
    AbortableDevice(std::shared_ptr<gloo::transport::Device> inner, std::shared_ptr<AbortState> state,
                    std::chrono::milliseconds timeout) :
        inner_(std::move(inner)),
        state_(std::move(state)), timeout_(timeout) {}
    std::string str() const override { return inner_->str(); }
    const std::string &getPCIBusID() const override { return inner_->getPCIBusID(); }
    int getInterfaceSpeed() const override { return inner_->getInterfaceSpeed(); }
    bool hasGPUDirect() const override { return inner_->hasGPUDirect(); }
    std::shared_ptr<gloo::transport::Context> createContext(int rank, int size) override;

private:
    std::shared_ptr<gloo::transport::Device> inner_;
    std::shared_ptr<AbortState> state_;
    std::chrono::milliseconds timeout_;
};

}  // namespace distc
