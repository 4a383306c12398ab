// Fragment buffers handed back for reuse: which one a sample of a given size gets.
// Header-only so that the reader (Sampler) and the decoder's return path (LiveProfile) pick alike.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sf::agent {

// The buffer a fragment of `bytes` is copied into: up to 16 KB the next power of two of at least
// 4 KB (4, 8 or 16 KB), above that whole pages. A few sizes, so that a recycled buffer mostly fits
// the next sample of its thread whatever its depth; but not 16 KB for every fragment: cut at their
// thread's stack top most are a few KB (httpserver's queue at 1 ms: 6.7 MB of fragments in 24.9 MB
// of 16 KB buffers), and the buffers of the start's backlog stay with the allocator afterwards.
inline size_t fragment_buffer_bytes(size_t bytes) {
    constexpr size_t kPage = 4096, kLargestClass = 16384;
    if (bytes <= kLargestClass) return std::max(kPage, std::bit_ceil(bytes));
    return (bytes + kPage - 1) & ~(kPage - 1);
}

// How many of the most recently returned buffers a pick looks at for one that is large enough.
inline constexpr size_t kSpareFitScan = 16;

// Moves a spare from `pool` into `out`: one of the last kSpareFitScan whose capacity holds
// `min_capacity` if there is one, else the last. A buffer that is too small is reallocated by its
// taker, and its pages, faulted in once, go back to the allocator while a fresh allocation is
// faulted in again (~4 pages at 8-13 us each on the 2-CPU VM): on xalan at 1 ms, 350-400 of a
// run's ~1,000 new buffers were replacements of a smaller spare taken from the back when a larger
// one lay a few places before it. False (and `out` untouched) if the pool is empty.
inline bool take_spare(std::vector<std::vector<uint8_t>>& pool, size_t min_capacity, std::vector<uint8_t>& out) {
    if (pool.empty()) return false;
    const size_t scan = std::min(pool.size(), kSpareFitScan);
    for (size_t i = 0; i < scan; ++i) {
        std::vector<uint8_t>& candidate = pool[pool.size() - 1 - i];
        if (candidate.capacity() >= min_capacity) {
            std::swap(candidate, pool.back());
            break;
        }
    }
    out.swap(pool.back());
    pool.pop_back();
    return true;
}

// Gives the whole pages inside a buffer about to be freed back to the kernel. A buffer the spares
// have no room for goes back to the allocator, which keeps its pages resident for the process's
// life: after a backlog (a JVM start held for VMInit with its heap pre-touched, 75-240 MB of
// fragments at once) the process stayed that much larger (httpserver with -XX:+AlwaysPreTouch:
// +70 to +110 MiB against +18 to +34 for async-profiler). The buffer is still ours until it is
// freed, so its pages may go: read again they are zeros, and the allocator writes what it keeps in
// a freed chunk (its links, the next chunk's size) after the free, into fresh pages then.
inline void release_buffer_pages(std::vector<uint8_t>& buffer) {
    constexpr uintptr_t kPage = 4096;
    const auto begin = (reinterpret_cast<uintptr_t>(buffer.data()) + kPage - 1) & ~(kPage - 1);
    const auto end = (reinterpret_cast<uintptr_t>(buffer.data()) + buffer.capacity()) & ~(kPage - 1);
    if (buffer.capacity() != 0 && end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace sf::agent
