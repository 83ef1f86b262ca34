#include "backends/host/failure_notes.hpp"

#include <algorithm>

namespace distc {

namespace {

constexpr const char *kKey = "broken";
// A note is a line of an error message: long ones are cut.
constexpr size_t kMaxNote = 2048;
// Telling gives up this soon when the store does not answer: the links
// break, and this rank's error comes, only after it. Reading waits this
// long for a note: a rank that broke the group left one before its links
// went, one that died leaves none.
constexpr Millis kTellWithin{300}, kReadWithin{100};

std::string text(const Bytes &b) {
    return std::string(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(std::min(b.size(), kMaxNote)));
}

}  // namespace

std::string FailureNotes::tell(const std::string &why) noexcept {
    try {
        std::string note = why.substr(0, kMaxNote);
        return text(store_->compare_set_within(kKey, ByteView(), ByteView(note.data(), note.size()), kTellWithin));
    } catch (const std::exception &) {
        return {};  // the store is gone too: peers keep what their links told them
    }
}

std::string FailureNotes::first() noexcept {
    try {
        return text(store_->get(kKey, kReadWithin));
    } catch (const std::exception &) {
        return {};
    }
}

}  // namespace distc
