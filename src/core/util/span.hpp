// Lists that a call lends to the calls it makes: Span views the caller's
// elements; InlineList holds a small list without allocating. Together they
// carry a collective's tensor lists, or a batch's operations, from the C API
// to the engine with no allocation on the way.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

namespace distc {

// Elements its caller keeps for the length of a call. Anything kept past
// the call copies them (to_vector).
template <typename T>
class Span {
public:
    Span() = default;
    Span(const T *p, size_t n) : p_(n ? p : nullptr), n_(n) {}
    Span(const std::vector<T> &v) : p_(v.data()), n_(v.size()) {}  // NOLINT: converts as a view
    const T *data() const { return p_; }
    size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    const T *begin() const { return p_; }
    const T *end() const { return p_ + n_; }
    const T &operator[](size_t i) const { return p_[i]; }
    std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }

private:
    const T *p_ = nullptr;
    size_t n_ = 0;
};

// `n` elements, set one by one before any is read: inline up to N of them,
// on the heap beyond. For plain values (copied as bytes, never destroyed).
template <typename T, size_t N>
class InlineList {
    static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

public:
    InlineList() = default;
    explicit InlineList(size_t n) : n_(n), heap_(n > N ? new T[n] : nullptr) {}
    void set(size_t i, const T &v) { new (slot(i)) T(v); }
    // Element `i`, value-initialized, for the caller to fill in place: a
    // value built elsewhere and copied in is read back wider than it was
    // written (a stall that waits for every store before it).
    T &emplace(size_t i) { return *new (slot(i)) T(); }
    Span<T> span() const { return Span<T>(n_ ? slot(0) : nullptr, n_); }
    operator Span<T>() const { return span(); }  // NOLINT: passed on as the view it is

private:
    T *slot(size_t i) const {
        return heap_ ? heap_.get() + i : std::launder(reinterpret_cast<T *>(const_cast<unsigned char *>(raw_))) + i;
    }
    size_t n_ = 0;
    std::unique_ptr<T[]> heap_;
    alignas(T) unsigned char raw_[N * sizeof(T)];  // left unset until set()
};

}  // namespace distc
