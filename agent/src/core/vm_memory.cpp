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

std::optional<int64_t> header_int(const uint8_t* bytes, size_t size, const ResolvedField& field) {
    if (!field.present || field.is_static || field.width == 0 || field.offset + field.width > size) {
        return std::nullopt;
    }
    return decode_int(bytes + field.offset, field.width, field.is_unsigned);
}

WindowedMemory::WindowedMemory(const VmMemory& memory, std::vector<uint8_t>& buffer, size_t window)
    : memory_(memory), buffer_(buffer), window_(window) {}

void WindowedMemory::set_limit(uint64_t limit) {
    limit_ = limit;
    begin_ = end_ = 0;
}

bool WindowedMemory::read(uint64_t address, void* out, size_t size) const {
    if (address >= begin_ && address + size >= address && address + size <= end_) {
        std::memcpy(out, buffer_.data() + (address - begin_), size);
        return true;
    }
    ++underlying_reads_;
    if (size > window_ || address >= limit_ || limit_ - address < size) return memory_.read(address, out, size);
    const size_t length = static_cast<size_t>(std::min<uint64_t>(window_, limit_ - address));
    if (buffer_.size() < length) buffer_.resize(window_);
    if (!memory_.read(address, buffer_.data(), length)) {
        begin_ = end_ = 0;
        ++underlying_reads_;
        return memory_.read(address, out, size);
    }
    begin_ = address;
    end_ = address + length;
    std::memcpy(out, buffer_.data(), size);
    return true;
}

void read_each_coalesced(const VmMemory& memory, VmMemory::Request* requests, size_t count, size_t max_gap,
                         size_t max_span) {
    if (count == 0) return;
    std::vector<size_t> order(count);
    for (size_t i = 0; i < count; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return requests[a].address < requests[b].address; });
    struct Run {
        size_t first, last;   // positions in `order`
        uint64_t begin, end;
    };
    std::vector<Run> runs;
    for (size_t k = 0; k < count; ++k) {
        const VmMemory::Request& r = requests[order[k]];
        const uint64_t end = r.address + r.size;
        if (end < r.address) {   // wraps: left to the memory alone
            runs.push_back(Run{k, k, r.address, r.address});
            continue;
        }
        if (!runs.empty()) {
            Run& run = runs.back();
            if (run.end > run.begin && r.address <= run.end + max_gap && std::max(end, run.end) - run.begin <= max_span) {
                run.last = k;
                run.end = std::max(end, run.end);
                continue;
            }
        }
        runs.push_back(Run{k, k, r.address, end});
    }
    // One request per run: a single request's own, a longer run's span into a buffer of its own.
    std::vector<VmMemory::Request> merged(runs.size());
    std::vector<std::vector<uint8_t>> spans(runs.size());
    for (size_t i = 0; i < runs.size(); ++i) {
        const Run& run = runs[i];
        if (run.first == run.last) {
            merged[i] = requests[order[run.first]];
        } else {
            spans[i].resize(run.end - run.begin);
            merged[i] = VmMemory::Request{run.begin, spans[i].data(), spans[i].size(), false};
        }
    }
    memory.read_each(merged.data(), merged.size());
    std::vector<VmMemory::Request> retry;
    std::vector<size_t> retried;   // index into `requests` of each retry
    for (size_t i = 0; i < runs.size(); ++i) {
        const Run& run = runs[i];
        if (run.first == run.last) {
            requests[order[run.first]].ok = merged[i].ok;
            continue;
        }
        for (size_t k = run.first; k <= run.last; ++k) {
            VmMemory::Request& r = requests[order[k]];
            if (merged[i].ok) {
                std::memcpy(r.out, spans[i].data() + (r.address - run.begin), r.size);
                r.ok = true;
            } else {
                retry.push_back(r);
                retried.push_back(order[k]);
            }
        }
    }
    if (retry.empty()) return;
    memory.read_each(retry.data(), retry.size());
    for (size_t j = 0; j < retry.size(); ++j) requests[retried[j]].ok = retry[j].ok;
}

}  // namespace sf::agent::vm
