#include "stack_pages.hpp"

#include <cstdint>

#include "stackfrag/kernel/proc_maps.hpp"

namespace sf::agent {

namespace {
constexpr uintptr_t kPageSize = 4096;   // x86_64; a larger page is read more than once, harmlessly
}

// Not instrumented: the frames above hold the callers' locals (and, under AddressSanitizer, their
// poisoned red zones), which are read here, never interpreted.
__attribute__((noinline, no_sanitize("address"))) size_t touch_stack_pages_above_current_frame() {
    const uintptr_t top = static_cast<uintptr_t>(kernel::current_thread_stack_top());
    const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    if (top == 0 || here >= top) return 0;
    size_t pages = 0;
    for (uintptr_t page = here & ~(kPageSize - 1); page < top; page += kPageSize) {
        (void)*reinterpret_cast<const volatile uint8_t*>(page < here ? here : page);
        ++pages;
    }
    return pages;
}

}  // namespace sf::agent
