// Where the return address and the caller's rbp are when the top frame's pc lies in a compiled
// method's prologue or epilogue (hotspot-frames.md §f), found by disassembling the method's bytes.
#pragma once

#include <cstdint>

#include "stackfrag/events/events.hpp"

namespace sf::detail {

struct TopFrameShape {
    enum class Kind : uint8_t {
        kComplete,   // the frame is fully built: use the frame size
        kPartial,    // prologue/epilogue: ret and saved rbp at the offsets below
        kNoCode,     // the CodeLoad has no instruction bytes: the caller must guess
    };
    Kind kind = Kind::kComplete;
    uint64_t return_offset = 0;      // bytes from the current sp to the return address
    bool fp_saved = false;           // the caller's rbp is stored at sp + saved_fp_offset
    uint64_t saved_fp_offset = 0;    // otherwise the caller's rbp is still in the rbp register
    bool in_prologue = false;
    bool in_epilogue = false;
};

// `pc` must lie inside [code.code_begin, code.code_end).
TopFrameShape analyze_top_frame(const CodeLoad& code, uint64_t pc);

}  // namespace sf::detail
