// Builders for the traces and method tables the profile tests feed into a Cct.
#pragma once

#include <string>
#include <vector>

#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/profile/cct.hpp"
#include "stackfrag/profile/method_names.hpp"

namespace sf::profile::testing {

inline MethodInfo method(uint64_t id, std::string class_name, std::string name, std::string signature = "()V",
                         std::vector<LineEntry> lines = {}, std::string source_file = {}) {
    MethodInfo m;
    m.method_id = id;
    m.class_name = std::move(class_name);
    m.name = std::move(name);
    m.signature = std::move(signature);
    m.lines = std::move(lines);
    m.source_file = std::move(source_file);
    return m;
}

inline Frame java(FrameKind kind, uint64_t method_id, int32_t bci = -1) {
    Frame f;
    f.kind = kind;
    f.method_id = method_id;
    f.bci = bci;
    return f;
}
inline Frame compiled(uint64_t method_id, int32_t bci = -1) { return java(FrameKind::kCompiled, method_id, bci); }
inline Frame interpreted(uint64_t method_id, int32_t bci = -1) { return java(FrameKind::kInterpreted, method_id, bci); }
inline Frame inlined(uint64_t method_id, int32_t bci = -1) { return java(FrameKind::kInlined, method_id, bci); }

inline Frame native(std::string symbol, uint64_t pc = 0, FrameKind kind = FrameKind::kNative) {
    Frame f;
    f.kind = kind;
    f.symbol = std::move(symbol);
    f.pc = pc;
    return f;
}

// Frames top (innermost) first, as the decoder gives them.
inline CallTrace trace(std::vector<Frame> top_first, TraceStatus status = TraceStatus::kComplete, uint32_t tid = 1) {
    CallTrace t;
    t.tid = tid;
    t.status = status;
    t.frames = std::move(top_first);
    return t;
}

// The frame names of the path to `id`, root-first.
inline std::vector<std::string> path_names(const Cct& cct, NodeId id) {
    std::vector<std::string> names;
    for (NodeId n : cct.path(id)) names.push_back(cct.frame_of(n).name);
    return names;
}

}  // namespace sf::profile::testing
