// libFuzzer target: the rendezvous URL parser (init_method strings come from
// the environment and command lines). A malformed URL is DISTC_EINVAL; any
// other exception, a crash or a sanitizer report is a finding.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/store/rendezvous.hpp"
#include "core/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string url(reinterpret_cast<const char *>(data), size);
    try {
        distc::ParsedUrl u = distc::parse_url(url);
        // What parsed must be consistent with the input it came from.
        if (u.scheme.empty() || url.find(u.scheme + "://") != 0) std::abort();
        for (const auto &kv : u.query)
            if (kv.first != "rank" && kv.first != "world_size") std::abort();
    } catch (const distc::Error &e) {
        if (e.code() != DISTC_EINVAL) std::abort();
    }
    return 0;
}
