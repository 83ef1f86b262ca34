// Backends other than gloo: those registered by the program
// (distc_backend_register) and plugin libraries found by name and loaded with
// dlopen on first use (distc/sys/backend.h says where they are looked for).
#pragma once

#include <memory>
#include <string>

#include "distc/sys/backend.h"

namespace distc {

struct BackendDef {
    std::string name;
    distc_backend_ops ops;  // copied; entries past the plugin's version are NULL
    void *payload;
    std::string origin;  // "registered by the program" or the library's path
};

// Throws DISTC_EINVAL (bad name or vtable) or DISTC_ESTATE (name taken).
void register_backend(const std::string &name, const distc_backend_ops *ops, void *payload, std::string origin);

// The backend `name`, loading its plugin if needed. Throws DISTC_ENOTFOUND
// when there is no such backend, DISTC_EBACKEND when its library cannot be
// loaded (the message names the missing library) or refuses to start.
std::shared_ptr<const BackendDef> find_backend(const std::string &name);
// Loads the plugin library at `path` as backend `name` (distc_plugin_load).
void load_backend(const std::string &name, const std::string &path);

}  // namespace distc
