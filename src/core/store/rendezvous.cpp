#include "core/store/rendezvous.hpp"

#include "core/store/prefix_store.hpp"

#include <cerrno>
#include <cstdlib>

#include "core/store/file_store.hpp"
#include "core/store/tcp/tcp_store.hpp"
#include "core/util/error.hpp"
#include "core/util/netif.hpp"
#include "core/util/socket.hpp"

namespace distc {

namespace {

int parse_int(const std::string &text, const std::string &what, long lo, long hi) {
    errno = 0;
    char *end = nullptr;
    long v = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || errno || *end != '\0' || v < lo || v > hi)
        fail(DISTC_EINVAL,
             what + " is '" + text + "', expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    return static_cast<int>(v);
}

const char *env_first(std::initializer_list<const char *> names, std::string *which) {
    for (const char *n : names) {
        const char *v = std::getenv(n);
        if (v && *v) {
            *which = n;
            return v;
        }
    }
    return nullptr;
}

// rank / world_size: explicit option, else URL query, else environment.
void resolve_rank_world(const RendezvousRequest &req, const ParsedUrl &u, bool use_env, int *rank, int *world) {
    *world = req.world_size;
    if (*world < 0 && u.query.count("world_size"))
        *world = parse_int(u.query.at("world_size"), "world_size", 1, 1 << 30);
    std::string which;
    if (*world < 0 && use_env) {
        if (const char *v = env_first({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}, &which))
            *world = parse_int(v, which, 1, 1 << 30);
    }
    *rank = req.rank;
    if (*rank < 0 && u.query.count("rank")) *rank = parse_int(u.query.at("rank"), "rank", 0, 1 << 30);
    if (*rank < 0 && use_env) {
        if (const char *v = env_first({"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}, &which))
            *rank = parse_int(v, which, 0, 1 << 30);
    }
    const char *hint = use_env ? " (set RANK/WORLD_SIZE, or run under mpirun, srun or distc-run)"
                               : " (add ?rank=R&world_size=N to the URL)";
    if (*world < 0) fail(DISTC_EINVAL, "world_size is missing from '" + req.url + "'" + hint);
    if (*rank < 0) fail(DISTC_EINVAL, "rank is missing from '" + req.url + "'" + hint);
    if (*rank >= *world)
        fail(DISTC_EINVAL, "rank " + std::to_string(*rank) + " is not below world_size " + std::to_string(*world));
}

RendezvousResult tcp_rendezvous(const RendezvousRequest &req, const std::string &host, int port, int rank, int world,
                                bool rank0_serves) {
    TcpStoreOptions o;
    o.host = host;
    o.port = port;
    o.is_server = rank0_serves && rank == 0;
    // As c10d's: peers on other machines reach rank 0 by MASTER_ADDR, which
    // may resolve to loopback on rank 0's own machine.
    o.listen_everywhere = !is_loopback(host);
    o.world_size = world;
    o.wait_for_workers = true;
    o.timeout = req.timeout;
    return {std::make_shared<TcpStore>(o), rank, world};
}

}  // namespace

std::string first_slurm_host(const std::string &nodelist) {
    // "pre[01-04,7]post,other": the first name is "pre01post".
    size_t end = 0;
    for (int depth = 0; end < nodelist.size(); ++end) {
        char c = nodelist[end];
        if (c == '[') ++depth;
        if (c == ']') --depth;
        if (c == ',' && depth == 0) break;
    }
    std::string first = nodelist.substr(0, end);
    auto open = first.find('['), close = first.find(']');
    if (open == std::string::npos) return first;
    if (close == std::string::npos || close < open)
        fail(DISTC_EINVAL, "SLURM_JOB_NODELIST '" + nodelist + "' has an unclosed '['");
    std::string range = first.substr(open + 1, close - open - 1);
    size_t stop = range.find_first_of("-,");
    return first.substr(0, open) + range.substr(0, stop) + first.substr(close + 1);
}

ParsedUrl parse_url(const std::string &url) {
    ParsedUrl u;
    auto sep = url.find("://");
    if (sep == std::string::npos || sep == 0)
        fail(DISTC_EINVAL, "url '" + url + "' has no scheme (expected env://, tcp:// or file://)");
    u.scheme = url.substr(0, sep);
    std::string rest = url.substr(sep + 3);
    auto q = rest.find('?');
    u.authority_path = rest.substr(0, q);
    if (q != std::string::npos) {
        std::string query = rest.substr(q + 1);
        size_t pos = 0;
        while (pos <= query.size()) {
            auto amp = query.find('&', pos);
            std::string item = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
            if (!item.empty()) {
                auto eq = item.find('=');
                if (eq == std::string::npos || eq == 0)
                    fail(DISTC_EINVAL, "url '" + url + "' has a malformed query item '" + item + "'");
                u.query[item.substr(0, eq)] = item.substr(eq + 1);
            }
            if (amp == std::string::npos) break;
            pos = amp + 1;
        }
    }
    for (const auto &kv : u.query)
        if (kv.first != "rank" && kv.first != "world_size")
            fail(DISTC_EINVAL, "url '" + url + "' has an unknown parameter '" + kv.first + "'");
    return u;
}

RendezvousResult rendezvous(const RendezvousRequest &req) {
    ParsedUrl u = parse_url(req.url);
    int rank, world;
    if (u.scheme == "env") {
        if (!u.authority_path.empty()) fail(DISTC_EINVAL, "url '" + req.url + "': env:// takes nothing after '//'");
        resolve_rank_world(req, u, true, &rank, &world);
        const char *addr = std::getenv("MASTER_ADDR");
        const char *port = std::getenv("MASTER_PORT");
        // Under srun: the allocation's first node (where task 0 runs), and a
        // port of the job's own.
        std::string slurm_addr, slurm_port;
        const char *nodes = std::getenv("SLURM_JOB_NODELIST");
        if (!nodes || !*nodes) nodes = std::getenv("SLURM_NODELIST");
        if ((!addr || !*addr) && nodes && *nodes && std::getenv("SLURM_PROCID")) {
            slurm_addr = first_slurm_host(nodes);
            addr = slurm_addr.c_str();
        }
        const char *job = std::getenv("SLURM_JOB_ID");
        if ((!port || !*port) && job && *job && std::getenv("SLURM_PROCID")) {
            slurm_port = std::to_string(20000 + parse_int(job, "SLURM_JOB_ID", 0, 2147483647) % 10000);
            port = slurm_port.c_str();
        }
        if (!addr || !*addr)
            fail(DISTC_EINVAL, "env:// needs MASTER_ADDR, which is not set (nor is srun's SLURM_JOB_NODELIST)");
        if (!port || !*port)
            fail(DISTC_EINVAL, "env:// needs MASTER_PORT, which is not set (nor is srun's SLURM_JOB_ID)");
        // A launcher that already hosts the store says so as torchelastic does.
        const char *agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
        bool launcher_serves = agent && (std::string(agent) == "True" || std::string(agent) == "1");
        RendezvousResult r =
            tcp_rendezvous(req, addr, parse_int(port, "MASTER_PORT", 1, 65535), rank, world, !launcher_serves);
        if (launcher_serves) {
            // As torch does: each restart of the job gets keys of its own in the launcher's store.
            const char *attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
            r.store = std::make_shared<PrefixStore>(
                std::string("/worker/attempt_") + (attempt && *attempt ? attempt : "0"), r.store);
        }
        return r;
    }
    if (u.scheme == "tcp") {
        resolve_rank_world(req, u, false, &rank, &world);
        const std::string &hp = u.authority_path;
        auto colon = hp.rfind(':');
        if (colon == std::string::npos || colon == 0)
            fail(DISTC_EINVAL, "url '" + req.url + "' lacks HOST:PORT after tcp://");
        return tcp_rendezvous(req, unbracketed(hp.substr(0, colon)),
                              parse_int(hp.substr(colon + 1), "the port in '" + req.url + "'", 1, 65535), rank, world,
                              true);
    }
    if (u.scheme == "file") {
        resolve_rank_world(req, u, false, &rank, &world);
        if (u.authority_path.empty() || u.authority_path[0] != '/')
            fail(DISTC_EINVAL, "url '" + req.url + "' needs an absolute path: file:///path/to/file");
        auto store = std::make_shared<FileStore>(u.authority_path, world);
        store->set_timeout(req.timeout);
        // Every rank announces itself; like the TCP server, rendezvous returns when all have.
        store->add("rendezvous/joined", 1);
        // Read the counter without writing: each add would append a record to the file.
        wait_for_count([&] { return parse_counter("rendezvous/joined", store->get("rendezvous/joined", req.timeout)); },
                       world, req.timeout, "ranks reached '" + req.url + "'");
        return {store, rank, world};
    }
    fail(DISTC_EINVAL, "url '" + req.url + "' has unknown scheme '" + u.scheme + "' (expected env, tcp or file)");
}

}  // namespace distc
