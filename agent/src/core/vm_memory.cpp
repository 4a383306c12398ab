#include "vm_memory.hpp"

#include <algorithm>
#include <cstring>

namespace sf::agent::vm {
namespace {

// `width` bytes at p (a field of that width), sign- or zero-extended.
std::optional<int64_t> decode_int(const uint8_t* p, uint32_t width, bool is_unsigned) {
    switch (width) {
        case 1: return is_unsigned ? int64_t{p[0]} : int64_t{static_cast<int8_t>(p[0])};
        case 2: {
            uint16_t v;
            std::memcpy(&v, p, 2);
            return is_unsigned ? int64_t{v} : int64_t{static_cast<int16_t>(v)};
        }
        case 4: {
            uint32_t v;
            std::memcpy(&v, p, 4);
            return is_unsigned ? int64_t{v} : int64_t{static_cast<int32_t>(v)};
        }
        case 8: {
            uint64_t v;
            std::memcpy(&v, p, 8);
            return static_cast<int64_t>(v);
        }
        default: return std::nullopt;
    }
}

}  // namespace

std::optional<std::string> VmMemory::c_string(uint64_t address, size_t max_length) const {
    std::string result;
    char chunk[64];
    while (result.size() < max_length) {
        // Read up to the end of the page only, so a string near an unmapped page still reads.
        size_t to_page_end = 4096 - ((address + result.size()) & 4095);
        size_t n = std::min<size_t>({sizeof(chunk), to_page_end, max_length - result.size()});
        if (!read(address + result.size(), chunk, n)) {
            return std::nullopt;
        }
        const void* nul = std::memchr(chunk, 0, n);
        if (nul != nullptr) {
            result.append(chunk, static_cast<const char*>(nul) - chunk);
            return result;
        }
        result.append(chunk, n);
    }
    return std::nullopt;
}

std::optional<int64_t> VmMemory::int_field(uint64_t base, const ResolvedField& field) const {
    if (!field.present || field.is_static || field.width == 0 || field.width > 8) return std::nullopt;
    uint8_t bytes[8];
    if (!read(base + field.offset, bytes, field.width)) return std::nullopt;
    return decode_int(bytes, field.width, field.is_unsigned);
}

std::optional<uint64_t> VmMemory::pointer_field(uint64_t base, const ResolvedField& field) const {
    if (!field.present) return std::nullopt;
    return value<uint64_t>(field.is_static ? field.address : base + field.offset);
}

std::optional<int64_t> header_int(const std::vector<uint8_t>& bytes, const ResolvedField& field) {
    if (!field.present || field.is_static || field.width == 0 || field.offset + field.width > bytes.size()) {
        return std::nullopt;
    }
    return decode_int(bytes.data() + field.offset, field.width, field.is_unsigned);
}

}  // namespace sf::agent::vm
