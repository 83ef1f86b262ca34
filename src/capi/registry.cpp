#include "capi/registry.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "core/util/error.hpp"

namespace distc {

namespace {

std::mutex g_mu;
std::map<std::string, std::shared_ptr<const BackendDef>> &registry() {
    static auto *m = new std::map<std::string, std::shared_ptr<const BackendDef>>;  // outlives static destructors
    return *m;
}

void check_name(const std::string &name) {
    bool ok = !name.empty() && name.size() <= 64;
    for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-');
    if (!ok) fail(DISTC_EINVAL, "backend name '" + name + "' is not 1 to 64 of [a-z0-9_-]");
}

BackendDef checked(const std::string &name, const distc_backend_ops *ops, void *payload, std::string origin) {
    check_name(name);
    if (!ops) fail(DISTC_EINVAL, "ops is NULL");
    if (ops->version < 1 || ops->version > DISTC_BACKEND_OPS_VERSION)
        fail(DISTC_EINVAL, "backend '" + name + "' (" + origin + ") has vtable version " +
                               std::to_string(ops->version) + "; this libdistc takes versions 1.." +
                               std::to_string(DISTC_BACKEND_OPS_VERSION) + " (rebuild the backend against this distc)");
    if (!ops->create || !ops->destroy)
        fail(DISTC_EINVAL, "backend '" + name + "' (" + origin + ") lacks create or destroy");
    if (ops->device_types == 0) fail(DISTC_EINVAL, "backend '" + name + "' takes no memory kind (device_types is 0)");
    // Later versions append: a vtable of an older version is copied only as far
    // as it reaches, and the entries it lacks stay NULL.
    distc_backend_ops copy{};
    std::memcpy(&copy, ops, ops->version == 1 ? offsetof(distc_backend_ops, mem_alloc) : sizeof copy);
    bool mem = copy.mem_alloc || copy.mem_free || copy.mem_copy || copy.mem_zero;
    if (mem && !(copy.mem_alloc && copy.mem_free && copy.mem_copy && copy.mem_zero))
        fail(DISTC_EINVAL, "backend '" + name + "' (" + origin +
                               ") sets some of mem_alloc, mem_free, mem_copy and "
                               "mem_zero but not all four");
    return BackendDef{name, copy, payload, std::move(origin)};
}

std::vector<std::string> plugin_dirs() {
    std::vector<std::string> dirs;
    if (const char *p = std::getenv("DISTC_PLUGIN_PATH")) {
        std::string s = p;
        size_t start = 0;
        while (start <= s.size()) {
            size_t end = s.find(':', start);
            if (end == std::string::npos) end = s.size();
            if (end > start) dirs.push_back(s.substr(start, end - start));
            start = end + 1;
        }
    }
    // <libdir>/distc next to this library, wherever it was installed or built.
    Dl_info info{};
    if (dladdr(reinterpret_cast<void *>(&plugin_dirs), &info) && info.dli_fname) {
        std::string lib = info.dli_fname;
        size_t slash = lib.rfind('/');
        dirs.push_back((slash == std::string::npos ? std::string(".") : lib.substr(0, slash)) + "/distc");
    }
    return dirs;
}

// Loads the plugin at `path` as backend `name`; g_mu is held.
std::shared_ptr<const BackendDef> load_plugin_file(const std::string &name, const std::string &path) {
    // RTLD_LOCAL: a plugin's engine symbols never meet another plugin's.
    void *dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        fail(DISTC_EBACKEND, "backend '" + name + "': cannot load " + path + ": " + (why ? why : "unknown error") +
                                 " (is its engine library installed and on the loader's path?)");
    }
    auto init = reinterpret_cast<distc_backend_plugin_init_fn>(dlsym(dl, "distc_backend_plugin_init"));
    if (!init) {
        dlclose(dl);
        fail(DISTC_EBACKEND,
             "backend '" + name + "': " + path + " is not a distc plugin (no distc_backend_plugin_init)");
    }
    const distc_backend_ops *ops = nullptr;
    void *payload = nullptr;
    distc_error_clear();
    int rc = init(&ops, &payload, DISTC_BACKEND_OPS_VERSION);
    if (rc < 0) {
        std::string msg = distc_error_last();
        dlclose(dl);
        fail(DISTC_EBACKEND, "backend '" + name + "': " + path + " refused to start: " + msg);
    }
    std::shared_ptr<const BackendDef> def;
    try {
        def = std::make_shared<const BackendDef>(checked(name, ops, payload, path));
    } catch (const Error &e) {
        dlclose(dl);
        fail(DISTC_EBACKEND, e.what());
    }
    // Kept loaded for the life of the process: its vtable is referenced from here on.
    registry()[name] = def;
    return def;
}

// Loads libdistc-<name>.so from the plugin directories; g_mu is held.
std::shared_ptr<const BackendDef> load_plugin(const std::string &name) {
    std::string file = "libdistc-" + name + ".so", looked;
    for (const auto &dir : plugin_dirs()) {
        std::string path = dir + "/" + file;
        looked += (looked.empty() ? "" : ", ") + dir;
        if (access(path.c_str(), F_OK) == 0) return load_plugin_file(name, path);
    }
    fail(DISTC_ENOTFOUND, "unknown backend '" + name + "': not built in (gloo), not registered, and no " + file +
                              " in " + (looked.empty() ? std::string("any plugin directory") : looked) +
                              " (DISTC_PLUGIN_PATH adds directories)");
}

}  // namespace

void register_backend(const std::string &name, const distc_backend_ops *ops, void *payload, std::string origin) {
    BackendDef def = checked(name, ops, payload, std::move(origin));
    std::lock_guard<std::mutex> lk(g_mu);
    if (name == "gloo" || registry().count(name)) fail(DISTC_ESTATE, "backend '" + name + "' already exists");
    registry()[name] = std::make_shared<const BackendDef>(std::move(def));
}

void load_backend(const std::string &name, const std::string &path) {
    check_name(name);
    std::lock_guard<std::mutex> lk(g_mu);
    if (name == "gloo" || registry().count(name)) fail(DISTC_ESTATE, "backend '" + name + "' already exists");
    if (access(path.c_str(), F_OK) != 0) fail_errno(DISTC_ENOTFOUND, "backend '" + name + "': " + path, errno);
    load_plugin_file(name, path);
}

std::shared_ptr<const BackendDef> find_backend(const std::string &name) {
    check_name(name);
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = registry().find(name);
    if (it != registry().end()) return it->second;
    return load_plugin(name);
}

}  // namespace distc
