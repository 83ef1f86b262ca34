// The point-to-point mailbox's batches seen by a carrier: a send is marked
// an exchange exactly where its batch also receives from that peer (named,
// not any source), which a shared-memory carrier sends inline where the
// kernel copies slowly (ShmP2p::set_inline_exchanges).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

// Before cmocka, whose fail() macro would rewrite the library's fail().
#include "backends/host/transport/p2p_mailbox.hpp"
#include "core/util/error.hpp"

#include <cstdarg>
#include <cstddef>
#include <csetjmp>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

using distc::AsyncBackend;
using distc::P2pMailbox;

namespace {

// Takes every send at once and records whether it was an exchange; moves
// no message in, so a receive times out.
struct Recorder final : P2pMailbox::Carrier {
    P2pMailbox &box;
    std::vector<std::pair<int, bool>> sends;  // peer, exchange
    explicit Recorder(P2pMailbox &b) : box(b) {}
    void start() override {}
    void queue(std::shared_ptr<P2pMailbox::Op> op) override {
        sends.emplace_back(op->peer, op->exchange);
        box.finish(*op, 0, "");
    }
    void unqueue(P2pMailbox::Op &) override {}
    std::string who(int peer) const override { return "rank " + std::to_string(peer); }
};

// Posts `ops` as one batch and returns what the carrier saw of its sends.
std::vector<std::pair<int, bool>> sent(std::vector<AsyncBackend::P2p> ops) {
    P2pMailbox box(4);
    Recorder r(box);
    for (int p = 0; p < 4; ++p) box.route(p, &r, P2pMailbox::Polling{});
    bool receives = false;
    for (const auto &o : ops) receives = receives || !o.send;
    try {
        box.post_wait(distc::Span<AsyncBackend::P2p>(ops.data(), ops.size()), distc::Millis(5));
        assert_false(receives);  // nothing arrives for a receive
    } catch (const distc::Error &e) {
        assert_true(receives);
        assert_int_equal(e.code(), DISTC_ETIMEOUT);
    }
    return r.sends;
}

void test_exchange_is_a_send_and_a_receive_with_one_peer(void **) {
    int32_t a[4] = {}, b[4] = {};
    const auto ta = distc::flat_tensor(a, distc::DType::Int32, 4), tb = distc::flat_tensor(b, distc::DType::Int32, 4);
    using S = std::vector<std::pair<int, bool>>;
    assert_true(sent({{true, ta, 1, 0}}) == (S{{1, false}}));                      // one way
    assert_true(sent({{true, ta, 1, 0}, {false, tb, 1, 0}}) == (S{{1, true}}));    // an exchange
    assert_true(sent({{false, tb, 1, 0}, {true, ta, 1, 0}}) == (S{{1, true}}));    // the receive first
    assert_true(sent({{true, ta, 1, 0}, {false, tb, 2, 0}}) == (S{{1, false}}));   // a ring: another peer
    assert_true(sent({{true, ta, 1, 0}, {false, tb, -1, 0}}) == (S{{1, false}}));  // any source
    // To two peers, receiving from one of them.
    assert_true(sent({{true, ta, 1, 0}, {true, ta, 2, 0}, {false, tb, 2, 0}}) == (S{{1, false}, {2, true}}));
}

}  // namespace

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_exchange_is_a_send_and_a_receive_with_one_peer),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
