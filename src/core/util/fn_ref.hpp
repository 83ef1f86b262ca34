// A non-owning reference to a callable, for hot paths where std::function's
// allocation and indirection show: the callable must outlive the call.
#pragma once

#include <type_traits>
#include <utility>

namespace distc {

template <typename Sig>
class FnRef;

template <typename R, typename... A>
class FnRef<R(A...)> {
public:
    template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FnRef>>>
    FnRef(F &&f)  // NOLINT: implicit, as std::function
        :
        obj_(const_cast<void *>(static_cast<const void *>(&f))),
        call_([](void *o, A... a) -> R {
            return (*static_cast<std::remove_reference_t<F> *>(o))(std::forward<A>(a)...);
        }) {}
    R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

private:
    void *obj_;
    R (*call_)(void *, A...);
};

}  // namespace distc
