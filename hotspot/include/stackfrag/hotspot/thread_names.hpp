// HotSpot's names for its own (non-Java) threads, as /proc/self/task/TID/comm shows them (cut to 15
// bytes): which kind of work a thread does, and the root frame its samples hang under in a profile.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "stackfrag/events/events.hpp"

namespace sf::hotspot {

namespace thread_names_detail {
inline bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
}  // namespace thread_names_detail

// The kind of a thread that is not a Java thread (JDK 17 and 25 names: G1, Parallel, ZGC and
// Shenandoah workers, C1/C2 compiler threads, the VM thread and the VM's hidden service threads), or
// the profiler's own ("stackfrag-read", "stackfrag-live", ...).
inline ThreadKind native_thread_kind(std::string_view name) {
    using thread_names_detail::starts_with;
    if (starts_with(name, "stackfrag-")) return ThreadKind::kProfiler;   // the agent's own threads
    if (starts_with(name, "GC Thread") || starts_with(name, "G1 ") || starts_with(name, "Shenandoah") ||
        starts_with(name, "Parallel GC") ||
        (name.size() > 1 && name[0] == 'Z' && name[1] >= 'A' && name[1] <= 'Z')) {
        return ThreadKind::kGc;
    }
    if (name.find("CompilerThre") != std::string_view::npos || starts_with(name, "Sweeper thread") ||
        starts_with(name, "JVMCI")) {
        return ThreadKind::kCompiler;
    }
    if (starts_with(name, "VM ") || starts_with(name, "Service Thread") || starts_with(name, "Monitor Deflati") ||
        starts_with(name, "Notification Th")) {
        return ThreadKind::kVm;
    }
    return ThreadKind::kOther;
}

// "[GC Thread]" for "GC Thread#3", "[C2 CompilerThread]" for "C2 CompilerThre" (comm's cut undone
// for the names HotSpot is known to give), "[VM Thread]"; numbers at the end are dropped so that
// every worker of a pool shares one root.
inline std::string native_thread_root(std::string_view name) {
    using thread_names_detail::is_digit;
    using thread_names_detail::starts_with;
    static constexpr std::pair<std::string_view, std::string_view> kCut[] = {
        {"C2 CompilerThre", "C2 CompilerThread"},         {"C1 CompilerThre", "C1 CompilerThread"},
        {"VM Periodic Tas", "VM Periodic Task Thread"},   {"Monitor Deflati", "Monitor Deflation Thread"},
        {"Notification Th", "Notification Thread"},       {"G1 Young RemSet", "G1 Young RemSet Sampling"},
        // The agent's own (mode=cpu samples them too).
        {"stackfrag-code-", "stackfrag-code-poll"},       {"stackfrag-jvmti", "stackfrag-jvmti-sampler"},
    };
    std::string base(name);
    for (const auto& [cut, whole] : kCut) {
        if (starts_with(name, cut)) {
            base = whole;
            break;
        }
    }
    // "GC Thread#12" -> "GC Thread", "G1 Conc#0" -> "G1 Conc", "C2 CompilerThread0" -> "C2 CompilerThread".
    size_t end = base.size();
    while (end > 0 && is_digit(base[end - 1])) --end;
    if (end < base.size()) {
        while (end > 0 && (base[end - 1] == '#' || base[end - 1] == ' ' || base[end - 1] == '-' || base[end - 1] == '_')) --end;
        if (end > 0) base.resize(end);
    }
    if (base.empty()) base = "native thread";
    return "[" + base + "]";
}

}  // namespace sf::hotspot
