// init_method URLs (env://, tcp://, file://) turned into a store, a rank and a world size.
#pragma once

#include <map>

#include "core/store/store.hpp"

namespace distc {

struct RendezvousRequest {
    std::string url;
    Millis timeout{Store::kDefaultTimeoutMs};
    int rank = -1;        // -1: from the URL or environment
    int world_size = -1;  // -1: from the URL or environment
};

struct RendezvousResult {
    std::shared_ptr<Store> store;
    int rank = -1;
    int world_size = -1;
};

RendezvousResult rendezvous(const RendezvousRequest &req);

// Exposed for tests: "scheme://rest?query" split into its parts.
struct ParsedUrl {
    std::string scheme, authority_path;
    std::map<std::string, std::string> query;
};
ParsedUrl parse_url(const std::string &url);
// The first host of a Slurm node list ("node[01-04],gpu7" -> "node01").
std::string first_slurm_host(const std::string &nodelist);

}  // namespace distc
