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
    // The same for bytes the caller knows are mapped until the copy ends (a blob's own memory
    // during the JVM's callback for it, VouchedMemory): where read() pays a system call to be safe
    // from faults, a plain copy. By default read().
    virtual bool read_mapped(uint64_t address, void* out, size_t size) const { return read(address, out, size); }

    struct Request {
        uint64_t address;
        void* out;
        size_t size;
        bool ok;   // set by read_each
    };
    // read() for each request. A memory whose reads are system calls overrides it to serve many
    // requests with one call.
    virtual void read_each(Request* requests, size_t count) const {
        for (size_t i = 0; i < count; ++i) requests[i].ok = read(requests[i].address, requests[i].out, requests[i].size);
    }

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

// Reads of `memory` served from a window of up to `window` bytes, read in one piece from the first
// address asked for outside it (never past the limit): a walk over many small neighbouring
// structures (the CodeCache's block and blob headers) costs one read per window instead of one or
// two per structure, which matters when each read is a system call. A window that cannot be read
// whole (an unreadable page in it) falls back to reading just the bytes asked for. One thread at a
// time; `buffer` is the caller's, reused from walk to walk.
class WindowedMemory final : public VmMemory {
public:
    WindowedMemory(const VmMemory& memory, std::vector<uint8_t>& buffer, size_t window);
    // Reads end before `limit` (e.g. the end of a CodeHeap's committed memory): a request that
    // reaches past it goes to the memory directly. Drops the current window.
    void set_limit(uint64_t limit);
    bool read(uint64_t address, void* out, size_t size) const override;
    // Reads that went to the underlying memory: whole windows, and requests read directly.
    uint64_t underlying_reads() const { return underlying_reads_; }

private:
    const VmMemory& memory_;
    std::vector<uint8_t>& buffer_;
    const size_t window_;
    uint64_t limit_ = 0;
    mutable uint64_t begin_ = 0, end_ = 0;   // the window's bytes are buffer_[0, end_ - begin_)
    mutable uint64_t underlying_reads_ = 0;
};

// Reads of `memory` that lie wholly inside one of two spans go to its read_mapped(), all others to
// its read(): the spans are what the caller vouches for (CodeCacheReader::find_live_blob: the
// CodeHeap below a blob the JVM keeps alive during the callback, and that stretch of its segment
// map), so a read that strays (a wrong offset, a stale pointer) is still checked.
class VouchedMemory final : public VmMemory {
public:
    struct Span {
        uint64_t begin = 0, end = 0;
        bool holds(uint64_t address, size_t size) const {
            return begin < end && address >= begin && address <= end && size <= end - address;
        }
    };
    VouchedMemory(const VmMemory& memory, Span first, Span second)
        : memory_(memory), first_(first), second_(second) {}
    bool read(uint64_t address, void* out, size_t size) const override {
        if (first_.holds(address, size) || second_.holds(address, size)) return memory_.read_mapped(address, out, size);
        return memory_.read(address, out, size);
    }

private:
    const VmMemory& memory_;
    const Span first_, second_;
};

// read_each for requests that often lie close together (a class's Method and ConstMethod objects
// are neighbours in metaspace): each run of requests, in address order, no more than `max_gap`
// bytes apart and within `max_span` bytes in all, goes to `memory` as one request for the run's
// whole span, so that a system-call memory pays one copy per run instead of one per request; the
// requests of a run whose span cannot be read whole (an unreadable page between them) are read
// one by one. Results as read_each's.
void read_each_coalesced(const VmMemory& memory, VmMemory::Request* requests, size_t count, size_t max_gap = 2048,
                         size_t max_span = 16384);

// An integer field of a structure already copied into `bytes` (offsets from the structure's start).
std::optional<int64_t> header_int(const uint8_t* bytes, size_t size, const ResolvedField& field);
inline std::optional<int64_t> header_int(const std::vector<uint8_t>& bytes, const ResolvedField& field) {
    return header_int(bytes.data(), bytes.size(), field);
}

}  // namespace sf::agent::vm
