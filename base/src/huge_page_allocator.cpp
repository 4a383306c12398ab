#include "stackfrag/base/huge_page_allocator.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace sf::huge_pages {
namespace {
size_t rounded(size_t bytes) { return (bytes + kBytes - 1) & ~(kBytes - 1); }
}  // namespace

void* map(size_t bytes) {
    const size_t size = rounded(bytes);
    // One huge page more than needed, so that an aligned range lies inside; the rest goes back.
    void* raw = mmap(nullptr, size + kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const auto begin = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (begin + kBytes - 1) & ~uintptr_t{kBytes - 1};
    if (aligned != begin) munmap(raw, aligned - begin);
    if (const uintptr_t tail = begin + size + kBytes - (aligned + size); tail != 0) {
        munmap(reinterpret_cast<void*>(aligned + size), tail);
    }
    // Fails only where the kernel has no transparent huge pages: plain pages then, as from malloc.
    (void)madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
    return reinterpret_cast<void*>(aligned);
}

void unmap(void* p, size_t bytes) { munmap(p, rounded(bytes)); }

bool advised(const void* p) {
    FILE* smaps = std::fopen("/proc/self/smaps", "r");
    if (smaps == nullptr) return false;
    const auto at = reinterpret_cast<uintptr_t>(p);
    char line[512];
    bool inside = false, found = false;
    while (std::fgets(line, sizeof line, smaps) != nullptr) {
        unsigned long begin = 0, end = 0;
        char dash = 0;
        if (std::sscanf(line, "%lx%c%lx", &begin, &dash, &end) == 3 && dash == '-') {
            inside = at >= begin && at < end;
        } else if (inside && std::strncmp(line, "VmFlags:", 8) == 0) {
            found = std::strstr(line, " hg") != nullptr;
            break;
        }
    }
    std::fclose(smaps);
    return found;
}

}  // namespace sf::huge_pages
