#include "stackfrag/decoder/call_trace.hpp"

#include <cstdio>

namespace sf {

const char* frame_kind_name(FrameKind kind) {
    switch (kind) {
        case FrameKind::kInterpreted: return "interpreted";
        case FrameKind::kCompiled: return "compiled";
        case FrameKind::kInlined: return "inlined";
        case FrameKind::kNativeWrapper: return "native_wrapper";
        case FrameKind::kNative: return "native";
        case FrameKind::kStub: return "stub";
        case FrameKind::kJava: return "java";
    }
    return "unknown";
}

const char* fail_reason_name(FailReason reason) {
    switch (reason) {
        case FailReason::kNone: return "none";
        case FailReason::kNoCodeMap: return "no_code_map";
        case FailReason::kEmptyStack: return "empty_stack";
        case FailReason::kUnknownPc: return "unknown_pc";
        case FailReason::kNativeUnwindFailed: return "native_unwind_failed";
        case FailReason::kSpOutOfFragment: return "sp_out_of_fragment";
        case FailReason::kSpNotIncreasing: return "sp_not_increasing";
        case FailReason::kUnknownMethod: return "unknown_method";
        case FailReason::kBadBci: return "bad_bci";
        case FailReason::kBadFrameSize: return "bad_frame_size";
        case FailReason::kNoPcDesc: return "no_pc_desc";
        case FailReason::kStubUnwindFailed: return "stub_unwind_failed";
        case FailReason::kBadEntryFrame: return "bad_entry_frame";
        case FailReason::kTooDeep: return "too_deep";
        case FailReason::kBadInterpreterFrame: return "bad_interpreter_frame";
        case FailReason::kBadReturnAddress: return "bad_return_address";
        case FailReason::kLostEvents: return "lost_events";
        case FailReason::kCount: break;
    }
    return "unknown";
}

std::string incomplete_hint(uint64_t incomplete, uint64_t samples, uint32_t stack_bytes) {
    constexpr uint32_t kLargestFragment = 65528;   // perf's limit for PERF_SAMPLE_STACK_USER
    if (samples == 0 || stack_bytes == 0 || stack_bytes >= kLargestFragment || incomplete * 100 < samples) return {};
    char text[320];
    std::snprintf(text, sizeof text,
                  "%.1f%% of the traces ran off the %u-byte stack fragment before the thread's first frame: "
                  "stack=%u copies stacks up to %ux deeper, at a higher copy cost per sample",
                  100.0 * static_cast<double>(incomplete) / static_cast<double>(samples), stack_bytes, kLargestFragment,
                  kLargestFragment / stack_bytes);
    return text;
}

}  // namespace sf
