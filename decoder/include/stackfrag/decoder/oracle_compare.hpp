// Comparing a decoded trace with AsyncGetCallTrace's answer for the same instant (validate mode):
// only the Java frames count, method and bci, top to bottom. ASGCT reports inlined frames too and
// uses lineno = bci (-3 for native methods, which the decoder reports as bci -1).
#pragma once

#include <cstdint>
#include <vector>

#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/events/events.hpp"

namespace sf {

enum class Agreement : uint8_t {
    kIdentical = 0,
    kOracleFailed,        // ASGCT returned no frames (agct_status <= 0)
    kDecoderFailed,       // the decoder's trace is kFailed
    kTopMethodDiffers,    // the innermost Java frame is a different method
    kTopBciDiffers,       // same innermost method, different bci
    kMissingFrame,        // the decoder lacks a frame ASGCT has (e.g. an inlined one) mid-stack
    kExtraFrame,          // the decoder has a frame ASGCT lacks mid-stack
    kBciDiffers,          // a deeper frame's bci differs
    kMethodDiffers,       // a deeper frame's method differs
    kShorter,             // the decoder's frames are a strict prefix of ASGCT's (incomplete walk)
    kLonger,              // ASGCT's frames are a strict prefix of the decoder's
    kCount
};

const char* agreement_name(Agreement a);   // "identical", "top_method_differs", ...

// The decoder's Java frames as ASGCT would list them.
std::vector<MethodBci> java_frames_of(const CallTrace& trace);

Agreement compare_with_oracle(const CallTrace& decoded, const Oracle& oracle);

}  // namespace sf
