// Reads of HotSpot's memory through resolved VMStructs fields: the one way the VM capture looks
// into the VM's structures. The agent reads its own process without faulting (agent/src/jvm/
// vmstructs.hpp); tests hand the readers a fake image.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vm_struct_tables.hpp"

namespace sf::agent::vm {

class VmMemory {
public:
    virtual ~VmMemory() = default;
    // Copies `size` bytes at `address`; false (never a fault) when any of them is unreadable.
    virtual bool read(uint64_t address, void* out, size_t size) const = 0;

    template <class T>
    std::optional<T> value(uint64_t address) const {
        T v{};
        if (!read(address, &v, sizeof(T))) return std::nullopt;
        return v;
    }
    // A NUL-terminated string of at most max_length bytes; nullopt when unreadable or unterminated.
    std::optional<std::string> c_string(uint64_t address, size_t max_length = 256) const;
    // An integer field at base + offset, of the field's width, sign- or zero-extended.
    std::optional<int64_t> int_field(uint64_t base, const ResolvedField& field) const;
    // A pointer-sized field at base + offset, or a static's value.
    std::optional<uint64_t> pointer_field(uint64_t base, const ResolvedField& field) const;
};

// An integer field of a structure already copied into `bytes` (offsets from the structure's start).
std::optional<int64_t> header_int(const std::vector<uint8_t>& bytes, const ResolvedField& field);

}  // namespace sf::agent::vm
