// `stackfrag replay REC [--json] [--collapsed FILE]`: feeds a recording's events, in file order, to
// the same CodeMap and Decoder the agent uses live, and reports how well the samples decode, how
// fast, and (for validate recordings) how often the traces equal AsyncGetCallTrace's. --ids and --cct
// give every sample its calling-context id in the tree written; --focus/--exclude filter that tree.
#include <cstring>
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/decoder/decoder.hpp"
#include "stackfrag/decoder/oracle_compare.hpp"
#include "stackfrag/decoder/stream_decoder.hpp"
#include "stackfrag/events/recording.hpp"
#include "stackfrag/profile/cct.hpp"
#include "stackfrag/profile/coverage.hpp"
#include "stackfrag/profile/export.hpp"
#include "stackfrag/profile/trace_filter.hpp"

namespace sf::cli {

namespace {

struct ReplayOptions {
    std::string path;
    bool json = false;
    std::string collapsed;
    std::string offcpu_collapsed;   // context-switch samples (events=switch), as collapsed stacks
    int show = 0;            // print this many disagreeing oracle pairs per kind
    int show_failures = 0;   // print this many failed profile samples per failure reason
    int show_words = 0;      // and this many words of each one's fragment, from sp
    bool no_libunwind = false;
    bool no_stitch = false;        // leave incomplete walks incomplete (to compare with stitching)
    bool no_incremental = false;   // walk every frame of every sample (to compare with incremental decoding)
    double defer_ms = 0;   // decode a sample once the stream is this far past its time
    // Decode a failed sample (or one through unannounced code) again this far on; as the agent does.
    double retry_ms = static_cast<double>(StreamDecoderOptions{}.retry_ns) / 1e6;
    std::string ids;       // one line per sample: "time_ns tid id" (docs/analyses.md, Context ids)
    std::string cct;       // the CCT json the ids refer to
    std::vector<std::string> focus, exclude;
};

// Java names for the profile straight from the decoder's CodeMap.
class CodeMapNames final : public profile::MethodNames {
public:
    explicit CodeMapNames(const CodeMap& map) : map_(map) {}
    const MethodInfo* find(uint64_t method_id) const override { return map_.method_by_id(method_id); }

private:
    const CodeMap& map_;
};

struct Tally {
    uint64_t samples = 0;
    uint64_t complete = 0;
    uint64_t stitched = 0;
    uint64_t incomplete = 0;
    std::map<std::string, uint64_t> failed;
    uint64_t frames = 0;   // over decoded traces
    uint64_t fragment_bytes = 0;
    std::vector<uint32_t> decode_ns;
    std::array<std::vector<uint32_t>, kThreadKinds> decode_ns_by_kind;   // by the sample's thread kind

    void add(const CallTrace& t, uint64_t ns, ThreadKind kind, const Sample* sample = nullptr) {
        ++samples;
        if (sample) fragment_bytes += sample->stack.size();
        const uint32_t clipped = static_cast<uint32_t>(std::min<uint64_t>(ns, UINT32_MAX));
        decode_ns.push_back(clipped);
        decode_ns_by_kind[static_cast<size_t>(kind)].push_back(clipped);
        if (t.status == TraceStatus::kFailed) {
            ++failed[fail_reason_name(t.failure)];
            return;
        }
        (t.status == TraceStatus::kComplete ? complete : t.status == TraceStatus::kStitched ? stitched : incomplete)++;
        frames += t.frames.size();
    }
    uint64_t decoded() const { return complete + stitched + incomplete; }
};

double percent(uint64_t part, uint64_t whole) { return whole ? 100.0 * double(part) / double(whole) : 0.0; }

uint32_t percentile(std::vector<uint32_t> v, double p) {
    if (v.empty()) return 0;
    const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * double(v.size())));
    std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
    return v[k];
}

std::string method_text(const CodeMap& map, const MethodBci& m) {
    const MethodInfo* info = map.method_by_id(m.method_id);
    if (!info) return fmt::format("0x{:x}@{}", m.method_id, m.bci);
    return fmt::format("{}.{}@{}", info->class_name, info->name, m.bci);
}

std::string frames_text(const CodeMap& map, const std::vector<MethodBci>& frames) {
    std::string s;
    for (size_t i = 0; i < frames.size() && i < 12; ++i) {
        if (i) s += " <- ";
        s += method_text(map, frames[i]);
    }
    if (frames.size() > 12) s += fmt::format(" <- ... ({} frames)", frames.size());
    return s;
}

// Where two traces of one sample part beyond the frames frames_text shows: the first frame below
// the top whose method or bci differs (or where one trace ends), with a few frames of each from
// there. Empty when they agree below the top frame or part within the first 12 frames.
std::string divergence_text(const CodeMap& map, const std::vector<MethodBci>& ours, const std::vector<MethodBci>& asgct) {
    size_t i = 1;
    while (i < ours.size() && i < asgct.size() && same_java_frame(ours[i], asgct[i])) ++i;
    if (i < 12 || (i == ours.size() && i == asgct.size())) return {};
    const auto from = [&](const std::vector<MethodBci>& frames) {
        std::string s;
        for (size_t k = i; k < frames.size() && k < i + 4; ++k) s += (k > i ? " <- " : "") + method_text(map, frames[k]);
        return s.empty() ? std::string("(ends)") : s;
    };
    return fmt::format("  from frame {}: ours:  {}\n  from frame {}: asgct: {}\n", i, from(ours), i, from(asgct));
}

// A failed sample as --show-failures prints it: where the walk began, and the frames it found before
// the step that failed, with the code each frame's pc lies in (the last one is where to look).
void print_failure(const CodeMap& map, const Sample& sample, const CallTrace& trace, int words) {
    fmt::print("[failed {}] t={} tid={} ip=0x{:x} sp=0x{:x} bp=0x{:x} fragment {} bytes from 0x{:x}\n",
               fail_reason_name(trace.failure), sample.time_ns, sample.tid, sample.regs.ip, sample.regs.sp,
               sample.regs.bp, sample.stack.size(), sample.stack_sp);
    for (const auto& f : trace.frames) {
        std::string where;
        const CodeLookup code = map.find_code(f.pc, sample.time_ns);
        if (code.compiled) {
            where = fmt::format(" [code 0x{:x}+0x{:x}, frame {} words{}]", code.compiled->load.code_begin,
                                f.pc - code.compiled->load.code_begin, code.compiled->load.frame_size_words,
                                f.sp_moved ? ", sp moved" : "");
        }
        fmt::print("    {} pc=0x{:x} {}{}\n", frame_kind_name(f.kind), f.pc,
                   f.symbol.empty() ? method_text(map, {f.method_id, f.bci}) : f.symbol.str(), where);
    }
    // The fragment's first words, each with the code it points into: which of them a walk could
    // take for a return address, and which one it should have.
    const size_t n = std::min(static_cast<size_t>(std::max(words, 0)), sample.stack.size() / sizeof(uint64_t));
    for (size_t i = 0; i < n; ++i) {
        uint64_t v = 0;
        std::memcpy(&v, sample.stack.data() + i * sizeof v, sizeof v);
        const CodeLookup c = map.find_code(v, sample.time_ns);
        std::string what;
        if (c.compiled) {
            what = fmt::format(" {} +0x{:x}", method_text(map, {c.compiled->load.method_id, -1}), v - c.compiled->load.code_begin);
        } else if (c.stub) {
            what = fmt::format(" {} +0x{:x}", map.stub_name(c.stub).str(), v - c.stub->begin);
        } else if (const ModuleMap* m = map.module_at(v)) {
            what = fmt::format(" {}", m->path);
        }
        fmt::print("      sp+0x{:<4x} 0x{:016x}{}\n", i * sizeof v, v, what);
    }
}

// What a replay found, computed once and then printed as text or as json.
struct ReplaySummary {
    Tally all, profile, oracle;   // all = profile + oracle samples
    uint32_t stack_bytes = 0;     // the fragment size the VM was sampled with (0 unknown)
    std::map<std::string, uint64_t> top_kinds;
    DecodeStats stats;
    RetryStats retried;
    uint64_t pairs = 0, both_ok = 0, identical = 0, differs_beyond_top_bci = 0;
    // ASGCT failed where the decoder did not; ASGCT's answer went through a frame whose code had moved
    // rsp, where it read a stale return slot (not counted in both_ok: there is nothing to match).
    uint64_t oracle_failed_we_decoded = 0, oracle_stale = 0;
    // ASGCT named the caller of an interpreted callee caught in its method-entry codelet (not in both_ok).
    uint64_t oracle_entry_codelet = 0;
    // ASGCT's walk ended early, at a frame HotSpot's safe_for_sender refuses (a VM runtime stub, a
    // deoptimized caller), where the decoder went on (not in both_ok).
    uint64_t oracle_stopped_early = 0;
    uint64_t oracle_exception_scope = 0;
    // ASGCT named the scope after a leaf call from compiled code into native code (not in both_ok).
    uint64_t oracle_leaf_call_scope = 0;
    // ASGCT named the scope after a call that a stub was resolving in the VM (not in both_ok).
    uint64_t oracle_stub_call_scope = 0;
    // ASGCT gave the carrier's frames from Continuation.enterSpecial on, the decoder also the mounted
    // virtual thread's above it (not in both_ok).
    uint64_t oracle_carrier_only = 0;
    // ASGCT gave only the decoder's outermost frames, from an older frame anchor, during a leaf call
    // from compiled code (not in both_ok).
    uint64_t oracle_older_anchor = 0;
    // ASGCT was called in a signal handler that had interrupted the thread, whose frames the
    // decoder went through to the interrupted one (not in both_ok).
    uint64_t oracle_in_signal_handler = 0;
    // ASGCT's answer was cut at the frames the validator asked for (not in both_ok).
    uint64_t oracle_truncated = 0;
    uint64_t stitched_pairs = 0, stitched_agree = 0;   // oracle pairs whose trace was stitched; of those, like ASGCT's
    std::map<std::string, uint64_t> disagreements;
    StitchStats stitching;
    uint64_t top_only = 0;   // the profiler's own threads' samples, decoded as their top frame alone
    const profile::TraceFilter* filter = nullptr;   // null or empty: no filter
    std::vector<std::string> focus, exclude;
    profile::FilterCounts filtered;
    std::optional<std::string> damage;
    std::vector<RecordingDamage> damages;
    profile::Coverage coverage;
    std::vector<std::string> changed_modules;   // files here of another build than the recording's

    bool filtering() const { return filter != nullptr && !filter->empty(); }
    double frames_per_trace() const { return all.decoded() ? double(all.frames) / double(all.decoded()) : 0.0; }
};

Tally sum(const Tally& a, const Tally& b) {
    Tally all = a;
    all.samples += b.samples;
    all.complete += b.complete;
    all.stitched += b.stitched;
    all.incomplete += b.incomplete;
    all.fragment_bytes += b.fragment_bytes;
    all.frames += b.frames;
    for (const auto& [k, v] : b.failed) all.failed[k] += v;
    all.decode_ns.insert(all.decode_ns.end(), b.decode_ns.begin(), b.decode_ns.end());
    for (size_t k = 0; k < kThreadKinds; ++k) {
        all.decode_ns_by_kind[k].insert(all.decode_ns_by_kind[k].end(), b.decode_ns_by_kind[k].begin(),
                                        b.decode_ns_by_kind[k].end());
    }
    return all;
}

nlohmann::json summary_json(const ReplaySummary& r) {
    nlohmann::json j;
    j["samples"] = r.all.samples;
    j["perf_samples"] = r.profile.samples;
    j["oracle_samples"] = r.oracle.samples;
    j["decoded"] = r.all.decoded();
    j["complete"] = r.all.complete;
    j["stitched"] = r.all.stitched;
    j["incomplete"] = r.all.incomplete;
    j["decoded_pct"] = percent(r.all.decoded(), r.all.samples);
    j["stitched_pct"] = percent(r.all.stitched, r.all.samples);
    j["incomplete_pct"] = percent(r.all.incomplete, r.all.samples);
    j["stitching"] = {{"stitched", r.stitching.stitched}, {"no_snapshot", r.stitching.no_snapshot},
                      {"mismatched", r.stitching.mismatched}, {"walk_failed", r.stitching.walk_failed}};
    j["profiler_top_only"] = r.top_only;
    // The profile's samples alone (the figures above include the validator's).
    const Tally& p = r.profile;
    j["profile"] = {{"samples", p.samples}, {"complete", p.complete}, {"stitched", p.stitched}, {"incomplete", p.incomplete},
                    {"fragment_bytes_mean", p.samples ? double(p.fragment_bytes) / double(p.samples) : 0.0}};
    // Stitched validator samples whose trace equals ASGCT's (apart from an interpreted top frame's bci).
    j["oracle_stitched_pairs"] = r.stitched_pairs;
    j["oracle_stitched_agree"] = r.stitched_agree;
    j["failed"] = r.all.failed;
    j["frames_per_trace"] = r.frames_per_trace();
    j["decode_ns_median"] = percentile(r.all.decode_ns, 0.5);
    j["decode_ns_p99"] = percentile(r.all.decode_ns, 0.99);
    // The same by the kind of thread sampled: Java threads' walks against the JVM's own threads'
    // deep C++ stacks (compiler, GC, VM threads).
    nlohmann::json& by_kind = j["decode_ns_by_thread_kind"];
    by_kind = nlohmann::json::object();
    std::vector<uint32_t> jvm;   // the JVM's own threads together: every kind but java and profiler
    for (size_t k = 0; k < kThreadKinds; ++k) {
        const auto kind = static_cast<ThreadKind>(k);
        const std::vector<uint32_t>& v = r.all.decode_ns_by_kind[k];
        if (v.empty()) continue;
        by_kind[thread_kind_name(kind)] = {{"samples", v.size()}, {"median", percentile(v, 0.5)}, {"p99", percentile(v, 0.99)}};
        if (kind != ThreadKind::kJava && kind != ThreadKind::kProfiler) jvm.insert(jvm.end(), v.begin(), v.end());
    }
    j["decode_ns_jvm_threads"] = {{"samples", jvm.size()}, {"median", percentile(jvm, 0.5)}, {"p99", percentile(jvm, 0.99)}};
    j["oracle_pairs"] = r.pairs;
    j["oracle_both_ok"] = r.both_ok;
    j["oracle_identical"] = r.identical;
    j["oracle_identical_pct"] = percent(r.identical, r.both_ok);
    // The top interpreted frame's bci: the decoder reads r13 (live), ASGCT the bcp slot (saved
    // only at calls), so they differ by design; this counts the pairs that agree apart from it.
    j["oracle_identical_except_top_bci"] = r.both_ok - r.differs_beyond_top_bci;
    j["oracle_disagreements"] = r.disagreements;
    j["oracle_failed_we_decoded"] = r.oracle_failed_we_decoded;
    j["oracle_stale"] = r.oracle_stale;
    j["oracle_entry_codelet"] = r.oracle_entry_codelet;
    j["oracle_stopped_early"] = r.oracle_stopped_early;
    j["oracle_exception_scope"] = r.oracle_exception_scope;
    j["oracle_leaf_call_scope"] = r.oracle_leaf_call_scope;
    j["oracle_stub_call_scope"] = r.oracle_stub_call_scope;
    j["oracle_carrier_only"] = r.oracle_carrier_only;
    j["oracle_older_anchor"] = r.oracle_older_anchor;
    j["oracle_in_signal_handler"] = r.oracle_in_signal_handler;
    j["oracle_truncated"] = r.oracle_truncated;
    j["top_frame_kinds"] = r.top_kinds;
    for (const DecodeStatField& f : kDecodeStatFields) j[f.group][f.key] = r.stats.*f.field;
    j["retried"] = {{"samples", r.retried.retried}, {"resolved", r.retried.resolved}};
    if (r.filtering()) {
        j["filter"] = {{"focus", r.focus}, {"exclude", r.exclude}, {"kept", r.profile.decoded() - r.filtered.dropped()},
                       {"not_in_focus", r.filtered.not_in_focus}, {"excluded", r.filtered.excluded}};
    }
    const profile::Coverage& c = r.coverage;
    nlohmann::json& cov = j["coverage"];
    cov["samples"] = c.samples;
    cov["sampled_cpu_ns"] = c.sampled_ns;
    cov["process_cpu_ns"] = c.process ? nlohmann::json(c.process_ns()) : nlohmann::json(nullptr);
    cov["process_user_ns"] = c.process ? nlohmann::json(c.process->user_ns) : nlohmann::json(nullptr);
    cov["process_sys_ns"] = c.process ? nlohmann::json(c.process->system_ns) : nlohmann::json(nullptr);
    // The process's CPU time before the sampling events opened (JVM start to VMInit, or to an attach).
    cov["process_cpu_before_sampling_ns"] = c.at_start ? nlohmann::json(c.before_start_ns()) : nlohmann::json(nullptr);
    // The hypervisor's share of the machine's busy CPU time while sampling: the clock events count it.
    cov["host_steal_share"] = c.host_steal_share() ? nlohmann::json(*c.host_steal_share()) : nlohmann::json(nullptr);
    cov["kernel_samples"] = c.kernel_samples;
    cov["lost_samples"] = c.lost_samples;   // taken by the kernel, not stored (a full ring)
    cov["lost_cpu_ns"] = c.lost_ns;
    cov["ratio"] = c.ratio() ? nlohmann::json(*c.ratio()) : nlohmann::json(nullptr);
    for (size_t k = 0; k < profile::Coverage::kKinds; ++k) {
        const auto kind = static_cast<ThreadKind>(k);
        cov["threads"][thread_kind_name(kind)] = {
            {"samples", c.samples_by_kind[k]}, {"cpu_ns", c.sampled_ns_by_kind[k]}, {"share", c.share(kind)}};
    }
    j["changed_modules"] = r.changed_modules;
    if (r.damage) j["damage"] = *r.damage;
    if (!r.damages.empty()) {
        // Per damaged region: where, why, and what it lost; samples that needed the lost
        // events are in failed.lost_events.
        nlohmann::json list = nlohmann::json::array();
        for (const RecordingDamage& d : r.damages) {
            nlohmann::json one = {{"offset", d.offset}, {"reason", d.error.describe()}, {"lost_bytes", d.lost_bytes}};
            one["resumed_at"] = d.resumed_at ? nlohmann::json(*d.resumed_at) : nlohmann::json();
            one["lost_events"] = d.lost_events ? nlohmann::json(*d.lost_events) : nlohmann::json();
            list.push_back(one);
        }
        j["damages"] = list;
    }
    return j;
}

void print_summary_text(const ReplaySummary& r) {
    const Tally& all = r.all;
    fmt::print("samples              {} ({} profile, {} oracle)\n", all.samples, r.profile.samples, r.oracle.samples);
    fmt::print("decoded              {:.2f}% ({} complete, {} stitched, {} incomplete)\n",
               percent(all.decoded(), all.samples), all.complete, all.stitched, all.incomplete);
    fmt::print("incomplete           {:.2f}%\n", percent(all.incomplete, all.samples));
    if (const StitchStats& st = r.stitching; st.stitched + st.no_snapshot + st.mismatched + st.walk_failed) {
        fmt::print("stitched             {:.2f}% ({}); not stitched: {} without an earlier snapshot, {} with other "
                   "bytes at the fragment's top, {} whose longer walk did not complete\n",
                   percent(all.stitched, all.samples), st.stitched, st.no_snapshot, st.mismatched, st.walk_failed);
    }
    if (const std::string hint = incomplete_hint(all.incomplete, all.samples, r.stack_bytes); !hint.empty()) {
        fmt::print("                     ({})\n", hint);
    }
    if (r.top_only != 0) fmt::print("profiler threads     {} samples, each its top frame alone\n", r.top_only);
    if (r.filtering()) {
        fmt::print("filter               {}\n",
                   profile::filter_sentence(*r.filter, r.profile.decoded() - r.filtered.dropped(), r.profile.decoded(),
                                            r.filtered));
    }
    for (const auto& [reason, n] : all.failed) {
        fmt::print("failed {:<20} {} ({:.2f}%)\n", reason, n, percent(n, all.samples));
    }
    fmt::print("frames per trace     {:.1f}\n", r.frames_per_trace());
    fmt::print("decode ns/sample     median {}  p99 {}\n", percentile(all.decode_ns, 0.5), percentile(all.decode_ns, 0.99));
    fmt::print("  by thread kind    ");
    for (size_t k = 0; k < kThreadKinds; ++k) {
        const std::vector<uint32_t>& v = all.decode_ns_by_kind[k];
        if (!v.empty()) fmt::print(" {} median {} ({} samples)", thread_kind_name(static_cast<ThreadKind>(k)), percentile(v, 0.5), v.size());
    }
    fmt::print("\n");
    fmt::print("top frames          ");
    for (const auto& [k, n] : r.top_kinds) fmt::print(" {} {}", k, n);
    // Every step counter by its word (kDecodeStatFields); the incremental ones have their own line.
    fmt::print("\nwalk                ");
    for (const DecodeStatField& f : kDecodeStatFields) {
        if (std::string_view(f.group) != "incremental") fmt::print(" {} {}", f.label, r.stats.*f.field);
    }
    fmt::print("\nincremental          {} samples took over {} steps, {} frames of their thread's last walk\n",
               r.stats.incremental_samples, r.stats.steps_reused, r.stats.frames_reused);
    fmt::print("decoded again        {} samples that failed or met unannounced code; {} resolved by then\n",
               r.retried.retried, r.retried.resolved);
    if (r.pairs) {
        fmt::print("oracle pairs         {} (both ok {}; ASGCT failed where we decoded {}; ASGCT stale {}; ASGCT "
                   "missed a callee in its entry codelet {}; ASGCT stopped early {}; ASGCT named the scope after an "
                   "exception pc {}; ASGCT named the scope after a leaf call {}; ASGCT named the scope after a call a stub "
                   "resolved {}; ASGCT gave only the carrier's frames {}; "
                   "ASGCT began at an older frame anchor {}; ASGCT ran inside another signal handler {}; ASGCT's "
                   "answer was cut at its frame limit {})\n",
                   r.pairs, r.both_ok, r.oracle_failed_we_decoded, r.oracle_stale, r.oracle_entry_codelet,
                   r.oracle_stopped_early, r.oracle_exception_scope, r.oracle_leaf_call_scope, r.oracle_stub_call_scope,
                   r.oracle_carrier_only, r.oracle_older_anchor, r.oracle_in_signal_handler, r.oracle_truncated);
        fmt::print("identical to ASGCT   {} ({:.2f}% of both ok); apart from the top bci {} ({:.2f}%)\n", r.identical,
                   percent(r.identical, r.both_ok), r.both_ok - r.differs_beyond_top_bci,
                   percent(r.both_ok - r.differs_beyond_top_bci, r.both_ok));
        std::vector<std::pair<uint64_t, std::string>> sorted;
        for (const auto& [k, n] : r.disagreements) sorted.emplace_back(n, k);
        std::sort(sorted.rbegin(), sorted.rend());
        for (const auto& [n, k] : sorted) fmt::print("  {:<22} {}\n", k, n);
    }
    fmt::print("{}\n", profile::coverage_text(r.coverage));
    if (!r.changed_modules.empty()) {
        fmt::print("changed modules      {} file(s) here are another build than the recorded one; a walk that "
                   "reaches one of their frames stops there (native_unwind_failed), unnamed:",
                   r.changed_modules.size());
        for (const std::string& path : r.changed_modules) fmt::print(" {}", path);
        fmt::print("\n");
    }
    for (const RecordingDamage& d : r.damages) fmt::print("damage: {}\n", d.describe());
}

// A pair of both answers where ASGCT's is the one that is off: its kind (--show-disagreements) and
// the summary's counter for it. Such pairs are not in both_ok.
struct OracleOff {
    const char* kind;
    uint64_t ReplaySummary::*counter;
};

std::optional<OracleOff> oracle_off(const CallTrace& trace, const Oracle& o, const CodeMap& map, Agreement a) {
    if (a != Agreement::kIdentical &&
        std::any_of(trace.frames.begin(), trace.frames.end(), [](const Frame& f) { return f.sp_moved; })) {
        return OracleOff{"oracle_stale", &ReplaySummary::oracle_stale};
    }
    // A top bci apart is the usual top-bci difference, kept in both_ok.
    if (a != Agreement::kIdentical && a != Agreement::kTopBciDiffers && oracle_in_signal_handler(trace, o)) {
        return OracleOff{"oracle_in_signal_handler", &ReplaySummary::oracle_in_signal_handler};
    }
    if (a == Agreement::kTopMethodDiffers && oracle_missed_entry_callee(trace, o, map)) {
        return OracleOff{"oracle_entry_codelet", &ReplaySummary::oracle_entry_codelet};
    }
    if (a == Agreement::kLonger && oracle_truncated(trace, o)) {
        return OracleOff{"oracle_truncated", &ReplaySummary::oracle_truncated};
    }
    if (a == Agreement::kLonger && oracle_stopped_early(trace, o, map)) {
        return OracleOff{"oracle_stopped_early", &ReplaySummary::oracle_stopped_early};
    }
    if (oracle_exception_scope(trace, o, map)) {
        return OracleOff{"oracle_exception_scope", &ReplaySummary::oracle_exception_scope};
    }
    if (oracle_leaf_call_scope(trace, o, map)) {
        return OracleOff{"oracle_leaf_call_scope", &ReplaySummary::oracle_leaf_call_scope};
    }
    if (oracle_stub_call_scope(trace, o, map)) {
        return OracleOff{"oracle_stub_call_scope", &ReplaySummary::oracle_stub_call_scope};
    }
    if (a == Agreement::kTopMethodDiffers && oracle_carrier_only(trace, o, map)) {
        return OracleOff{"oracle_carrier_only", &ReplaySummary::oracle_carrier_only};
    }
    if (a != Agreement::kIdentical && oracle_older_anchor(trace, o)) {
        return OracleOff{"oracle_older_anchor", &ReplaySummary::oracle_older_anchor};
    }
    return std::nullopt;
}

int run_replay(const ReplayOptions& options) {
    auto opened = RecordingReader::open(options.path);
    if (!opened) {
        fmt::print(stderr, "stackfrag replay: {}\n", opened.error().describe());
        return 2;
    }
    auto& reader = *opened;
    StreamDecoderOptions stream_options;
    stream_options.decoder.use_libunwind = !options.no_libunwind;
    stream_options.decoder.incremental = !options.no_incremental;
    stream_options.stitch = !options.no_stitch;
    // A sample is decoded once the stream has moved `defer_ms` past its time, so code and method
    // announcements that the VM posted after the sample was taken can still be applied first.
    stream_options.defer_ns = static_cast<uint64_t>(options.defer_ms * 1e6);
    stream_options.retry_ns = static_cast<uint64_t>(options.retry_ms * 1e6);
    std::function<void(const Event&, const CallTrace&)> on_trace;
    StreamDecoder stream(stream_options, [&on_trace](const Event& e, const CallTrace& t) { on_trace(e, t); });
    const CodeMap& map = stream.code_map();
    const Decoder& decoder = stream.decoder();
    CodeMapNames names(map);
    profile::Cct cct(&names, profile::CctOptions{});
    Result<profile::TraceFilter> parsed_filter = profile::TraceFilter::parse(options.focus, options.exclude);
    if (!parsed_filter.ok()) {
        fmt::print(stderr, "stackfrag replay: {}\n", parsed_filter.error().describe());
        return 2;
    }
    profile::TraceFilter& filter = *parsed_filter;
    const bool builds_cct =
        !options.collapsed.empty() || !options.cct.empty() || !options.ids.empty() || !filter.empty();
    if (!options.cct.empty() && !options.cct.ends_with(".json")) {
        fmt::print(stderr, "stackfrag replay: --cct {}: the tree the ids refer to is written as json; name it .json\n",
                   options.cct);
        return 2;
    }
    std::ofstream ids;
    if (!options.ids.empty()) {
        ids.open(options.ids, std::ios::binary | std::ios::trunc);
        if (!ids) {
            fmt::print(stderr, "stackfrag replay: cannot open {}\n", options.ids);
            return 2;
        }
    }
    std::string id_line;

    ReplaySummary summary;
    Tally& samples = summary.profile;
    Tally& oracle_samples = summary.oracle;
    profile::FilterCounts& filtered = summary.filtered;
    profile::Cct off_cpu_cct(&names, profile::CctOptions{});
    std::map<std::string, int> shown;   // examples printed per kind of disagreement
    std::map<FailReason, int> failures_shown;

    on_trace = [&](const Event& e, const CallTrace& trace) {
        // Context-switch samples make the off-CPU profile, one count per switch, as in the agent.
        if (const auto* s = std::get_if<Sample>(&e); s && s->source == SampleSource::kPerfSwitch) {
            samples.add(trace, stream.last_decode_ns(), stream.last_thread_kind());
            const bool kept = filter.judge(trace, &names) == profile::FilterVerdict::kKeep;   // as the agent
            if (kept && !options.offcpu_collapsed.empty()) (void)off_cpu_cct.add(trace);
            return;
        }
        if (is_profile_sample(e)) {
            samples.add(trace, stream.last_decode_ns(), stream.last_thread_kind(), std::get_if<Sample>(&e));
            const auto* sample = std::get_if<Sample>(&e);
            if (sample && trace.status == TraceStatus::kFailed && failures_shown[trace.failure] < options.show_failures) {
                ++failures_shown[trace.failure];
                print_failure(map, *sample, trace, options.show_words);
            }
            if (!trace.frames.empty()) ++summary.top_kinds[frame_kind_name(trace.frames[0].kind)];
            if (!builds_cct) return;
            // The filter judges before the tree sees the trace, as the agent's live profile does.
            const profile::FilterVerdict verdict = filter.judge(trace, &names);
            std::optional<profile::NodeId> id;
            if (verdict == profile::FilterVerdict::kKeep) {
                // Weighted by the period, as the agent's live profile is, so both write the same profile.
                id = cct.add(trace, stream.period_ns());
            } else {
                (verdict == profile::FilterVerdict::kExcluded ? filtered.excluded : filtered.not_in_focus)++;
            }
            if (ids.is_open()) {
                id_line = fmt::format("{} {} ", trace.time_ns, trace.tid);
                if (id) id_line += std::to_string(*id);
                else if (trace.status == TraceStatus::kFailed) id_line += fmt::format("failed:{}", fail_reason_name(trace.failure));
                else id_line += "filtered";
                id_line += '\n';
                ids.write(id_line.data(), static_cast<std::streamsize>(id_line.size()));
            }
            return;
        }
        const auto* o = std::get_if<Oracle>(&e);
        if (!o) return;
        oracle_samples.add(trace, stream.last_decode_ns(), stream.last_thread_kind());
        ++summary.pairs;
        const Agreement a = compare_with_oracle(trace, *o);
        if (trace.status == TraceStatus::kStitched && a != Agreement::kOracleFailed) {
            ++summary.stitched_pairs;
            // Identical once the top frame's bci is ASGCT's (the decoder reads it live, ASGCT from a slot).
            Oracle same_top = *o;
            const std::vector<MethodBci> ours = java_frames_of(trace);
            if (!ours.empty() && !same_top.frames.empty() && same_top.frames[0].method_id == ours[0].method_id) {
                same_top.frames[0].bci = ours[0].bci;
            }
            if (compare_with_oracle(trace, same_top) == Agreement::kIdentical) ++summary.stitched_agree;
        }
        if (a == Agreement::kOracleFailed && trace.status != TraceStatus::kFailed) ++summary.oracle_failed_we_decoded;
        const bool both = a != Agreement::kOracleFailed && a != Agreement::kDecoderFailed;
        const std::optional<OracleOff> off = both ? oracle_off(trace, *o, map, a) : std::nullopt;
        if (off) ++(summary.*(off->counter));
        else if (both) ++summary.both_ok;
        if (a == Agreement::kIdentical) {
            ++summary.identical;
            return;
        }
        const bool not_ours = off.has_value();   // ASGCT's answer is the one that is off
        if (!not_ours && a != Agreement::kTopBciDiffers && a != Agreement::kOracleFailed &&
            a != Agreement::kDecoderFailed) {
            ++summary.differs_beyond_top_bci;
        }
        std::string kind = off ? off->kind : agreement_name(a);
        if (a == Agreement::kDecoderFailed) kind += fmt::format(" {}", fail_reason_name(trace.failure));
        if (a == Agreement::kOracleFailed && trace.status != TraceStatus::kFailed) kind = "oracle_failed_we_decoded";
        if (!not_ours) ++summary.disagreements[agreement_name(a)];
        if (shown[kind] < options.show && (a != Agreement::kOracleFailed || trace.status != TraceStatus::kFailed)) {
            ++shown[kind];
            const std::vector<MethodBci> ours = java_frames_of(trace);
            fmt::print("[{}] t={} tid={} status={} {}\n  ours:  {}\n  asgct: {}\n{}", kind,
                       o->sample.time_ns, o->sample.tid, static_cast<int>(trace.status),
                       fail_reason_name(trace.failure), frames_text(map, ours), frames_text(map, o->frames),
                       divergence_text(map, ours, o->frames));
            for (const auto& f : trace.frames) {
                fmt::print("    {} pc=0x{:x} {}\n", frame_kind_name(f.kind), f.pc,
                           f.symbol.empty() ? method_text(map, {f.method_id, f.bci}) : f.symbol.str());
            }
        }
    };
    profile::CoverageTally coverage;
    decode_recording(*reader, stream, [&coverage](const Event& event) { coverage.observe(event); });

    summary.all = sum(samples, oracle_samples);
    summary.coverage = coverage.coverage();
    summary.stack_bytes = map.has_vm() ? map.vm().sample_stack_bytes : 0;
    summary.stats = decoder.stats();
    summary.changed_modules = decoder.changed_modules();
    summary.retried = stream.retry_stats();
    summary.filter = &filter;
    summary.focus = options.focus;
    summary.exclude = options.exclude;
    summary.stitching = stream.stitch_stats();
    summary.top_only = stream.top_only_traces();
    if (reader->damage()) summary.damage = reader->damage()->describe();
    summary.damages = reader->damages();
    if (options.json) fmt::print("{}\n", summary_json(summary).dump(2));
    else print_summary_text(summary);

    if (ids.is_open()) {
        ids.close();
        if (ids.fail()) {
            fmt::print(stderr, "stackfrag replay: writing {} failed\n", options.ids);
            return 2;
        }
    }
    if (!options.cct.empty()) {
        cct.info().period_ns = stream.period_ns();
        cct.info().start_unix_ns = reader->header().created_unix_ns;
        if (Status written = profile::write_profile(cct, options.cct); !written.ok()) {
            fmt::print(stderr, "stackfrag replay: {}\n", written.error().describe());
            return 2;
        }
    }
    if (!options.collapsed.empty()) {
        std::ofstream out(options.collapsed);
        Status written = out ? profile::write_collapsed(cct, out) : Status(make_error(Errc::kInternal, "cannot open " + options.collapsed));
        if (!written.ok()) {
            fmt::print(stderr, "stackfrag replay: {}\n", written.error().describe());
            return 2;
        }
    }
    if (!options.offcpu_collapsed.empty()) {
        std::ofstream out(options.offcpu_collapsed);
        Status written = out ? profile::write_collapsed(off_cpu_cct, out)
                             : Status(make_error(Errc::kInternal, "cannot open " + options.offcpu_collapsed));
        if (!written.ok()) {
            fmt::print(stderr, "stackfrag replay: {}\n", written.error().describe());
            return 2;
        }
    }
    return reader->damage() ? 1 : 0;
}

}  // namespace

void add_replay(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("replay", "Decode every sample of a recording and report decode rates, "
                                             "speed and agreement with AsyncGetCallTrace");
    auto options = std::make_shared<ReplayOptions>();
    cmd->add_option("recording", options->path, "recording file (.sfr)")->required();
    cmd->add_flag("--json", options->json, "print one JSON object instead of text");
    cmd->add_option("--collapsed", options->collapsed, "write the decoded samples as collapsed stacks to FILE");
    cmd->add_option("--offcpu-collapsed", options->offcpu_collapsed,
                    "write the context-switch samples (events=switch: where threads blocked) as collapsed stacks "
                    "to FILE; --collapsed then holds only the on-CPU ones");
    cmd->add_option("--show-disagreements", options->show, "print up to this many oracle pairs per kind of disagreement (a decoder failure per reason; oracle_stale, oracle_exception_scope, oracle_leaf_call_scope, "
                    "oracle_stub_call_scope, oracle_carrier_only, oracle_older_anchor, oracle_entry_codelet, oracle_stopped_early, oracle_failed_we_decoded)");
    cmd->add_option("--show-failures", options->show_failures,
                    "print up to this many failed samples per failure reason: their registers, fragment and the "
                    "frames found before the failing step, each with the code its pc lies in");
    cmd->add_option("--show-words", options->show_words,
                    "with --show-failures: also this many words of each failed sample's fragment from its sp, each "
                    "with the compiled method, stub or module it points into");
    cmd->add_option("--defer-ms", options->defer_ms,
                    "decode each sample only once the stream is this many ms past it (lets late code "
                    "announcements arrive first; 0 decodes in stream order, as the agent does)");
    cmd->add_option("--retry-ms", options->retry_ms,
                    "decode a sample again this many ms of stream later when its walk failed or went through code "
                    "no event had announced yet (the VM announces code after it runs); 0 decodes each sample once. "
                    "The agent's live profile uses the default")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->add_flag("--no-libunwind", options->no_libunwind, "unwind native code by the rbp chain only");
    cmd->add_option("--ids", options->ids,
                    "write one line per sample to FILE: \"time_ns tid id\", id the sample's node in the --cct tree "
                    "(or filtered; a failed walk's id is under its [failed: REASON] node)");
    cmd->add_option("--cct", options->cct, "write the calling context tree the --ids refer to (FILE.json)");
    cmd->add_option("--focus", options->focus,
                    "keep only samples with this method (pkg.Class.method) or class (pkg.Class) on the stack; repeatable")
        ->allow_extra_args(false);
    cmd->add_option("--exclude", options->exclude, "drop samples with this method or class on the stack; repeatable")
        ->allow_extra_args(false);
    cmd->add_flag("--no-stitch", options->no_stitch,
                  "leave walks that run off their fragment incomplete instead of continuing them through the "
                  "thread's earlier snapshot (docs/decoding.md)");
    cmd->add_flag("--no-incremental", options->no_incremental,
                  "walk every frame of every sample instead of taking over the unchanged lower part of the "
                  "thread's last walk (the same traces; to compare decode speed)");
    cmd->footer("Exit status: 0 read to the end, 1 the recording is damaged (results cover every intact chunk; "
                "each damaged one is listed with what it lost, and samples that needed its events fail with "
                "lost_events), 2 the file cannot be read.");
    cmd->callback([options, &exit_code] { exit_code = run_replay(*options); });
}

}  // namespace sf::cli
