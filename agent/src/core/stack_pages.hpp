// Makes the calling thread's stack pages between its sp and the stack's top present, so that the
// kernel's copy of a sample's stack fragment (from interrupt context, no faults) does not stop short.
#pragma once

#include <cstddef>

namespace sf::agent {

// Reads one byte of every page from the calling thread's current frame up to its stack's top
// (pthread_getattr_np). A page a frame reserved but never wrote (HotSpot's Threads::create_vm
// leaves one in its ~8 KB frame on JDK 25) is not present; perf copies the user stack without
// faulting pages in, so every sample taken below such a page got a fragment ending at it. A read
// fault maps the shared zero page (no memory is used) or the page the frame wrote. Returns the
// number of pages read (0 when the stack's top is unknown).
size_t touch_stack_pages_above_current_frame();

}  // namespace sf::agent
