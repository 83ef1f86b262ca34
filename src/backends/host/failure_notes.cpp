#include "backends/host/failure_notes.hpp"

#include <algorithm>

namespace distc {

namespace {

constexpr const char *kKey = "broken";
// A note is a line of an error message: long ones are cut.
constexpr size_t kMaxNote = 2048;
// Telling gives up this soon when the store does not answer (the links are
// broken by then; this rank's error waits). Reading waits this long for a
// note: a rank that broke the group writes one once its links are gone (a
// TCP link may first wait up to 0.1 s for its sends: HostBackend::close_links),
// one that died leaves none.
constexpr Millis kTellWithin{300}, kReadWithin{250};

std::string text(const Bytes &b) {
    return std::string(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(std::min(b.size(), kMaxNote)));
}

}  // namespace

std::string FailureNotes::tell(const std::string &why) noexcept {
    if (!store_) return {};
    try {
        std::string note = why.substr(0, kMaxNote);
        return text(store_->compare_set_within(kKey, ByteView(), ByteView(note.data(), note.size()), kTellWithin));
    } catch (const std::exception &) {
        return {};  // the store is gone too: peers keep what their links told them
    }
}

std::string FailureNotes::first() noexcept {
    if (!store_) return {};
    try {
        return text(store_->get(kKey, kReadWithin));
    } catch (const std::exception &) {
        return {};
    }
}

}  // namespace distc
