// Gives the C allocator's free pages back to the kernel, and reads the process's resident memory
// around it: after a burst of allocations has been freed, glibc otherwise keeps those pages.
#pragma once

#include <cstdint>

namespace sf {

// The process's resident bytes (/proc/self/statm); -1 when it cannot be read.
int64_t resident_bytes();

struct HeapTrim {
    int64_t resident_before = -1;   // bytes, as resident_bytes()
    int64_t resident_after = -1;
    uint64_t ns = 0;                // how long the trim took (monotonic clock)
    // What went back, as far as the resident memory shows it (other threads allocate meanwhile).
    uint64_t given_back() const {
        return resident_before > resident_after && resident_after >= 0 ? uint64_t(resident_before - resident_after) : 0;
    }
};

// malloc_trim(0): glibc returns the whole free pages inside every arena, not only those at an
// arena's top that free() already gives back. It takes each arena's lock while it walks that
// arena's free chunks (milliseconds for a few hundred MB of them), as HotSpot's own
// TrimNativeHeapInterval does from a thread of its own.
HeapTrim trim_free_heap();

}  // namespace sf
