#include "stackfrag/base/heap_trim.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdlib>

#include "stackfrag/base/clock.hpp"

namespace sf {

int64_t resident_bytes() {
    // Read with plain system calls into a stack buffer: the caller may be measuring the allocator.
    const int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char text[128];
    const ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return -1;
    text[n] = '\0';
    // "size resident shared text lib data dt", in pages.
    char* end = nullptr;
    (void)std::strtoull(text, &end, 10);
    if (end == text) return -1;
    char* resident_end = nullptr;
    const unsigned long long resident = std::strtoull(end, &resident_end, 10);
    if (resident_end == end) return -1;
    return static_cast<int64_t>(resident) * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

HeapTrim trim_free_heap() {
    HeapTrim t;
    t.resident_before = resident_bytes();
    const uint64_t start = monotonic_ns();
    (void)malloc_trim(0);
    t.ns = monotonic_ns() - start;
    t.resident_after = resident_bytes();
    return t;
}

}  // namespace sf
