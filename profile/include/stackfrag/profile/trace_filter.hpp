// Selective profiling: which samples a profile keeps, judged by the methods on their stacks. focus
// keeps the samples inside a method's dynamic extent, exclude drops them; stacks stay whole.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stackfrag/base/result.hpp"
#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/profile/cct.hpp"
#include "stackfrag/profile/method_names.hpp"

namespace sf::profile {

// A Java method ("pkg.Class.method") or a class ("pkg.Class": every method of it), as a user names
// it. Dots and slashes are the same separator ("pkg/Class.method" is the internal form profiles
// print); nested classes are written with '$' ("pkg.Outer$Inner.run"). In the dotted form the last
// name may be a method or a class, so "a.b.C.d" matches method d of class a.b.C and every method
// of class a.b.C.d; in the slash form a '.' after the last '/' marks the method ("a/b/C.d" is
// only the method), and a single name ("Main") is a class of the unnamed package.
class MethodPattern {
public:
    // An error says what is wrong: empty, an empty name ("a..b", ".a"), or a character no JVM
    // name has (';', '[', whitespace, ...); '<' and '>' only in "<init>" and "<clinit>".
    static Result<MethodPattern> parse(std::string_view text);

    // Whether a method of this class (internal or dotted form) and name matches.
    bool matches(std::string_view class_name, std::string_view method_name) const;
    // Whether a profile frame is such a method: its name "pkg/Class.method" is split at the last
    // '.'. Root, thread and "[truncated]" frames never match, nor names without a '.'; native
    // frames do, by name, so collapsed stacks from profilers that do not mark Java frames work.
    bool matches(const FrameDesc& frame) const;

    const std::string& text() const { return text_; }

private:
    std::string text_;
    size_t method_start_ = 0;   // where the method name starts in text_ (after its '.'); 0: none
    bool may_be_class_ = true;  // the whole text may name a class
};

// Why a sample is kept or dropped.
enum class FilterVerdict : uint8_t {
    kKeep,
    kNotInFocus,   // a focus is set and no focus method is on the stack
    kExcluded,     // an exclude method is on the stack (wins over focus)
};

// The focus and exclude patterns of one profile. A sample is kept when its stack has a frame of
// any focus pattern (or there is none) and no frame of any exclude pattern. Failed traces have no
// stack to judge and are always kept (Cct::add counts them as failed, outside the tree); an
// incomplete trace is judged by the frames it has.
class TraceFilter {
public:
    TraceFilter() = default;   // keeps everything

    // Empty texts are skipped, so unset options give a filter that keeps everything. The error
    // names the option ("focus" or "exclude") and the pattern.
    static Result<TraceFilter> parse(std::span<const std::string> focus, std::span<const std::string> exclude);
    static Result<TraceFilter> parse(const std::string& focus, const std::string& exclude) {
        return parse(std::span<const std::string>(&focus, 1), std::span<const std::string>(&exclude, 1));
    }

    bool empty() const { return focus_.empty() && exclude_.empty(); }
    const std::vector<MethodPattern>& focus() const { return focus_; }
    const std::vector<MethodPattern>& exclude() const { return exclude_; }
    // "focus=a.B.c exclude=x.Y" (patterns as given), for summaries; empty when empty().
    std::string describe() const;

    // A decoded trace, its frames named as Cct::add names them (Java frames through `names`;
    // methods it does not know match nothing). Remembers the answer per method id, so it is not
    // thread-safe; one decoder thread owns a filter.
    FilterVerdict judge(const CallTrace& trace, const MethodNames* names);

    // One frame's matches: bit 0 a focus pattern, bit 1 an exclude pattern.
    static constexpr uint8_t kFocusHit = 1, kExcludeHit = 2;
    uint8_t frame_hits(const FrameDesc& frame) const;
    // The verdict for a stack whose frames had these hits or'ed together.
    FilterVerdict verdict(uint8_t stack_hits) const;

private:
    uint8_t method_hits(std::string_view class_name, std::string_view method_name) const;

    std::vector<MethodPattern> focus_;
    std::vector<MethodPattern> exclude_;
    std::unordered_map<uint64_t, uint8_t> hits_by_method_;
};

// Samples a filter dropped, by reason.
struct FilterCounts {
    uint64_t not_in_focus = 0;
    uint64_t excluded = 0;
    uint64_t dropped() const { return not_in_focus + excluded; }
};

// The summaries' sentence: "focus=a.B.c: kept K of N decoded samples; dropped D (x not in focus,
// y excluded)", of `judged` samples the filter saw (`what` they were), `kept` of them kept.
std::string filter_sentence(const TraceFilter& filter, uint64_t kept, uint64_t judged, const FilterCounts& counts,
                            std::string_view what = "decoded samples");

// A new tree with only the samples of `cct` the filter keeps: every node's self samples are one
// stack (the path from the root), judged by its frames; kept stacks are copied with their frames,
// call sites and weights. Info, options and failed counts stay; added and incomplete count the
// kept samples. Node ids are new (in the order the kept nodes are first met depth-first).
Cct filter_cct(const Cct& cct, const TraceFilter& filter, FilterCounts* counts = nullptr);

}  // namespace sf::profile
