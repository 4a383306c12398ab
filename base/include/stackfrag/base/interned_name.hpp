// A name kept once for the life of the process (native symbols, stub names, thread kinds): equal
// names are one pointer, so frames carry, copy, compare and hash them without touching their bytes.
#pragma once

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace sf {

class InternedName {
public:
    InternedName() = default;   // no name
    // Interns `name` (a lock and a hash: for names met once, not per frame). "" is no name.
    InternedName(std::string_view name);
    InternedName(const char* name) : InternedName(std::string_view(name)) {}
    InternedName(const std::string& name) : InternedName(std::string_view(name)) {}

    const std::string& str() const { return name_ != nullptr ? *name_ : empty_string(); }
    std::string_view view() const { return str(); }
    bool empty() const { return name_ == nullptr; }
    void clear() { name_ = nullptr; }
    // Stable for the process's life, equal exactly for equal names; nullptr for no name.
    const std::string* key() const { return name_; }

    friend bool operator==(InternedName a, InternedName b) { return a.name_ == b.name_; }

private:
    static const std::string& empty_string();
    const std::string* name_ = nullptr;
};

std::ostream& operator<<(std::ostream& out, InternedName name);

}  // namespace sf

template <>
struct std::hash<sf::InternedName> {
    size_t operator()(sf::InternedName n) const noexcept { return std::hash<const void*>{}(n.key()); }
};
