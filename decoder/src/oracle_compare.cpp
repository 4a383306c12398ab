#include "stackfrag/decoder/oracle_compare.hpp"

#include "code_shape.hpp"
#include "vm_stubs.hpp"

#include <algorithm>

namespace sf {

namespace {
constexpr int32_t kAsgctNativeLineno = -3;

bool is_java(FrameKind k) {
    return k == FrameKind::kInterpreted || k == FrameKind::kCompiled || k == FrameKind::kInlined ||
           k == FrameKind::kNativeWrapper || k == FrameKind::kJava;
}
int32_t normalized_bci(int32_t bci) { return bci == kAsgctNativeLineno ? -1 : bci; }
}  // namespace

const char* agreement_name(Agreement a) {
    switch (a) {
        case Agreement::kIdentical: return "identical";
        case Agreement::kOracleFailed: return "oracle_failed";
        case Agreement::kDecoderFailed: return "decoder_failed";
        case Agreement::kTopMethodDiffers: return "top_method_differs";
        case Agreement::kTopBciDiffers: return "top_bci_differs";
        case Agreement::kMissingFrame: return "missing_frame";
        case Agreement::kExtraFrame: return "extra_frame";
        case Agreement::kBciDiffers: return "bci_differs";
        case Agreement::kMethodDiffers: return "method_differs";
        case Agreement::kShorter: return "shorter";
        case Agreement::kLonger: return "longer";
        case Agreement::kCount: break;
    }
    return "unknown";
}

std::vector<MethodBci> java_frames_of(const CallTrace& trace) {
    std::vector<MethodBci> out;
    for (const auto& f : trace.frames) {
        if (is_java(f.kind)) out.push_back({f.method_id, f.bci});
    }
    return out;
}

bool same_java_frame(const MethodBci& ours, const MethodBci& asgct) {
    return ours.method_id == asgct.method_id && ours.bci == normalized_bci(asgct.bci);
}

Agreement compare_with_oracle(const CallTrace& decoded, const Oracle& oracle) {
    if (oracle.agct_status <= 0 || oracle.frames.empty()) return Agreement::kOracleFailed;
    if (decoded.status == TraceStatus::kFailed) return Agreement::kDecoderFailed;
    const std::vector<MethodBci> ours = java_frames_of(decoded);
    const auto& theirs = oracle.frames;
    const size_t n = std::min(ours.size(), theirs.size());
    for (size_t i = 0; i < n; ++i) {
        if (same_java_frame(ours[i], theirs[i])) continue;
        const bool same_method = ours[i].method_id == theirs[i].method_id;
        if (same_method) return i == 0 ? Agreement::kTopBciDiffers : Agreement::kBciDiffers;
        if (i == 0) return Agreement::kTopMethodDiffers;
        if (i + 1 < theirs.size() && ours[i].method_id == theirs[i + 1].method_id) return Agreement::kMissingFrame;
        if (i + 1 < ours.size() && ours[i + 1].method_id == theirs[i].method_id) return Agreement::kExtraFrame;
        return Agreement::kMethodDiffers;
    }
    if (ours.size() < theirs.size()) return Agreement::kShorter;
    if (ours.size() > theirs.size()) return Agreement::kLonger;
    return Agreement::kIdentical;
}

bool oracle_missed_entry_callee(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map) {
    if (oracle.agct_status <= 0 || decoded.status == TraceStatus::kFailed || decoded.frames.empty()) return false;
    const Frame& top = decoded.frames.front();
    if (top.kind != FrameKind::kInterpreted || !map.in_method_entry_codelet(top.pc)) return false;
    // ASGCT starts at the frame rbp points to: the caller's if it is interpreted; below a compiled
    // caller (which keeps rbp as it found it: compiled code saves and restores it) the nearest
    // interpreted frame further down. Every frame above that one is left out.
    CallTrace below = decoded;
    below.frames.erase(below.frames.begin());
    while (!below.frames.empty() && below.frames.front().kind != FrameKind::kInterpreted) {
        const FrameKind k = below.frames.front().kind;
        if (k != FrameKind::kCompiled && k != FrameKind::kInlined) return false;
        below.frames.erase(below.frames.begin());
    }
    if (java_frames_of(below).empty()) return false;
    const Agreement rest = compare_with_oracle(below, oracle);
    return rest == Agreement::kIdentical || (rest == Agreement::kLonger && oracle_stopped_early(below, oracle, map));
}

bool oracle_stopped_early(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map) {
    if (compare_with_oracle(decoded, oracle) != Agreement::kLonger) return false;
    // The decoder's frame that is ASGCT's last Java frame, and its next Java frame.
    const size_t asgct_frames = oracle.frames.size();
    size_t java_seen = 0, i = 0;
    for (; i < decoded.frames.size() && java_seen < asgct_frames; ++i) {
        if (is_java(decoded.frames[i].kind)) ++java_seen;
    }
    for (; i < decoded.frames.size(); ++i) {
        const Frame& f = decoded.frames[i];
        if (is_java(f.kind)) {
            if (f.kind != FrameKind::kCompiled && f.kind != FrameKind::kInlined) return false;
            const CompiledCode* code = map.find_compiled(f.pc, decoded.time_ns);
            return code != nullptr && detail::is_deopt_return(code->load, f.pc);
        }
        if (f.kind == FrameKind::kStub) {
            const Stub* stub = map.find_stub(f.pc);
            if (detail::calls_into_vm(stub) || detail::is_upcall_stub(stub)) return true;
        }
    }
    return false;
}

namespace {

// ASGCT's frames are the decoder's with the inline chain of its first Java frame `i` (compiled)
// replaced by the chain of the first PcDesc after that frame's pc.
bool asgct_took_next_scope(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map, size_t i) {
    const Frame& first = decoded.frames[i];
    if (first.kind != FrameKind::kCompiled && first.kind != FrameKind::kInlined) return false;
    const CompiledCode* code = map.find_compiled(first.pc, decoded.time_ns);
    if (code == nullptr) return false;
    const uint64_t offset = first.pc - code->load.code_begin;
    const auto& scopes = code->load.scopes;
    const auto next = std::upper_bound(scopes.begin(), scopes.end(), offset,
                                       [](uint64_t off, const PcScope& s) { return off < s.pc_offset; });
    if (next == scopes.end() || next->first + next->count > code->load.frames.size()) return false;
    // The frame's inline chain (inlined frames, then the compiled one, all at its pc) replaced by
    // that PcDesc's. The caller may be the same code at the same call site (a recursion).
    size_t end = i;
    while (end < decoded.frames.size() && decoded.frames[end].pc == first.pc &&
           decoded.frames[end].kind == FrameKind::kInlined) {
        ++end;
    }
    if (end == decoded.frames.size() || decoded.frames[end].kind != FrameKind::kCompiled) return false;
    ++end;
    CallTrace asgct_view = decoded;
    asgct_view.frames.erase(asgct_view.frames.begin() + static_cast<std::ptrdiff_t>(i),
                            asgct_view.frames.begin() + static_cast<std::ptrdiff_t>(end));
    std::vector<Frame> chain;
    for (uint32_t k = 0; k < next->count; ++k) {
        const MethodBci& m = code->load.frames[next->first + k];
        Frame f = first;
        f.kind = k + 1 == next->count ? FrameKind::kCompiled : FrameKind::kInlined;
        f.method_id = m.method_id;
        f.bci = m.bci;
        chain.push_back(f);
    }
    asgct_view.frames.insert(asgct_view.frames.begin() + static_cast<std::ptrdiff_t>(i), chain.begin(), chain.end());
    const Agreement a = compare_with_oracle(asgct_view, oracle);
    return compare_with_oracle(decoded, oracle) != Agreement::kIdentical &&
           (a == Agreement::kIdentical || a == Agreement::kTopBciDiffers);
}

// The index of the decoder's first Java frame (frames.size() if none).
size_t first_java_frame(const CallTrace& decoded) {
    size_t i = 0;
    while (i < decoded.frames.size() && !is_java(decoded.frames[i].kind)) ++i;
    return i;
}

// The index of the decoder's first Java frame when frames lie above it and each of them is native
// (or, with `stubs`, native or a stub): the thread was in the VM or native code called from Java.
// 0 otherwise (never such an index).
size_t first_java_below_vm(const CallTrace& decoded, bool stubs) {
    const size_t i = first_java_frame(decoded);
    if (i == 0 || i == decoded.frames.size()) return 0;
    for (size_t k = 0; k < i; ++k) {
        const FrameKind kind = decoded.frames[k].kind;
        if (kind != FrameKind::kNative && !(stubs && kind == FrameKind::kStub)) return 0;
    }
    return i;
}

}  // namespace

bool oracle_exception_scope(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map) {
    if (oracle.agct_status <= 0 || decoded.status == TraceStatus::kFailed) return false;
    // The first Java frame, right after the ExceptionBlob frame (nothing but native and stub frames above).
    const size_t i = first_java_frame(decoded);
    if (i == 0 || i == decoded.frames.size()) return false;
    const Frame& above = decoded.frames[i - 1];
    if (above.kind != FrameKind::kStub || above.symbol != "ExceptionBlob") return false;
    return asgct_took_next_scope(decoded, oracle, map, i);
}

bool oracle_leaf_call_scope(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map) {
    if (oracle.agct_status <= 0 || decoded.status == TraceStatus::kFailed) return false;
    // Only native frames above the first Java frame: compiled code called into the VM or libc
    // directly, without a stub between.
    const size_t i = first_java_below_vm(decoded, false);
    return i != 0 && asgct_took_next_scope(decoded, oracle, map, i);
}

bool oracle_stub_call_scope(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map) {
    if (oracle.agct_status <= 0 || decoded.status == TraceStatus::kFailed) return false;
    const size_t i = first_java_below_vm(decoded, true);
    if (i == 0) return false;
    const Frame& above = decoded.frames[i - 1];
    if (above.kind != FrameKind::kStub || above.symbol == "ExceptionBlob") return false;
    return asgct_took_next_scope(decoded, oracle, map, i);
}

namespace {
// ASGCT's frames are the decoder's last ones, and there are fewer of them.
bool oracle_is_outer_part(const std::vector<MethodBci>& ours, const std::vector<MethodBci>& theirs) {
    if (ours.size() <= theirs.size()) return false;
    const size_t k = ours.size() - theirs.size();
    for (size_t i = 0; i < theirs.size(); ++i) {
        if (ours[k + i].method_id != theirs[i].method_id || ours[k + i].bci != normalized_bci(theirs[i].bci)) return false;
    }
    return true;
}
}  // namespace

bool oracle_older_anchor(const CallTrace& decoded, const Oracle& oracle) {
    if (oracle.agct_status <= 0 || oracle.frames.empty() || decoded.status == TraceStatus::kFailed) return false;
    const size_t i = first_java_below_vm(decoded, false);
    if (i == 0) return false;
    const FrameKind first = decoded.frames[i].kind;
    if (first != FrameKind::kCompiled && first != FrameKind::kInlined) return false;
    return oracle_is_outer_part(java_frames_of(decoded), oracle.frames);
}

bool oracle_truncated(const CallTrace& decoded, const Oracle& oracle) {
    return oracle.agct_status > 0 && oracle.frames.size() == kOracleMaxFrames &&
           decoded.status != TraceStatus::kFailed && compare_with_oracle(decoded, oracle) == Agreement::kLonger;
}

bool oracle_in_signal_handler(const CallTrace& decoded, const Oracle& oracle) {
    if (oracle.agct_status <= 0 || decoded.status == TraceStatus::kFailed) return false;
    const size_t i = first_java_below_vm(decoded, true);
    return i != 0 && std::any_of(decoded.frames.begin(), decoded.frames.begin() + static_cast<ptrdiff_t>(i),
                                 [](const Frame& f) { return f.signal_frame; });
}

bool oracle_carrier_only(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map) {
    if (oracle.agct_status <= 0 || oracle.frames.empty() || decoded.status == TraceStatus::kFailed) return false;
    const MethodInfo* top = map.method_by_id(oracle.frames.front().method_id);
    if (top == nullptr || top->name != "enterSpecial" || top->class_name != "jdk/internal/vm/Continuation") return false;
    return oracle_is_outer_part(java_frames_of(decoded), oracle.frames);   // from that enterSpecial frame on
}

}  // namespace sf
