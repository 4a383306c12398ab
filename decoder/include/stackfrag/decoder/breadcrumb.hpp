// Breadcrumbs: a record the agent may leave on a thread's stack when Java calls into native code it
// controls, so the decoder can get back to the Java caller when native unwinding fails.
//
// The record is five 8-byte-aligned words, lowest address first:
//   magic0, magic1, java_sp, java_pc, java_fp
// java_sp/java_pc/java_fp describe the last Java frame (as a JavaFrameAnchor would: the sp of the
// Java frame that made the call, the pc to resume decoding at, its fp — 0 when not meaningful).
// The decoder scans the fragment upwards from the top frame's sp for magic0 followed by magic1,
// accepts the record only if java_sp lies above the record and inside the fragment and java_pc is
// Java code, and continues the walk there. The magic words are chosen to be implausible as
// addresses (non-canonical) and as small integers.
#pragma once

#include <cstdint>

namespace sf::breadcrumb {

inline constexpr uint64_t kMagic0 = 0x5354'4B46'5247'4231ULL;   // "STKFRGB1"
inline constexpr uint64_t kMagic1 = 0xB4EA'DC4B'5D1A'7A11ULL;

inline constexpr int kWords = 5;
inline constexpr int kJavaSpOffset = 16;   // bytes from the record's first word
inline constexpr int kJavaPcOffset = 24;
inline constexpr int kJavaFpOffset = 32;
// The agent's thunks keep their record right below their saved rbp: a frame whose rbp has it there,
// with its own return address as java_pc, is a thunk's (named kThunkName in profiles: the
// profiler's own cost on the thread, not [unknown]).
inline constexpr int kThunkRecordFromFp = -40;
inline constexpr const char* kThunkName = "[stackfrag breadcrumb]";

struct Record {
    uint64_t magic0 = kMagic0;
    uint64_t magic1 = kMagic1;
    uint64_t java_sp = 0;
    uint64_t java_pc = 0;
    uint64_t java_fp = 0;
};
static_assert(sizeof(Record) == kWords * 8);

}  // namespace sf::breadcrumb
