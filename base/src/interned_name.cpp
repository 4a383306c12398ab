#include "stackfrag/base/interned_name.hpp"

#include <mutex>
#include <ostream>
#include <unordered_set>

namespace sf {

namespace {
struct Pool {
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };
    std::mutex lock;
    std::unordered_set<std::string, Hash, std::equal_to<>> names;   // nodes: stable addresses
};

// Never destroyed: a decoder thread may still name frames while the process exits (the agent's
// threads outlive static destructors in a JVM that calls exit()).
Pool& pool() {
    static Pool* const p = new Pool;
    return *p;
}
}  // namespace

InternedName::InternedName(std::string_view name) {
    if (name.empty()) return;
    Pool& p = pool();
    const std::lock_guard<std::mutex> guard(p.lock);
    auto it = p.names.find(name);
    if (it == p.names.end()) it = p.names.emplace(name).first;
    name_ = &*it;
}

const std::string& InternedName::empty_string() {
    static const std::string* const empty = new std::string;
    return *empty;
}

std::ostream& operator<<(std::ostream& out, InternedName name) { return out << name.str(); }

}  // namespace sf
