// Golden replays of real recordings (groundtruth workload, validate mode, JDK 17, 21 and 25): the
// expectations come from AsyncGetCallTrace's answers recorded with the samples, not from this
// decoder's own output.
#include <catch2/catch.hpp>

#include <string>

#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/decoder/decoder.hpp"
#include "stackfrag/decoder/oracle_compare.hpp"
#include "stackfrag/events/recording.hpp"

using namespace sf;

namespace {

struct ReplayResult {
    uint64_t samples = 0, decoded = 0;
    uint64_t oracle_decoded = 0;   // of the oracle's samples (Java threads)
    uint64_t pairs = 0, both_ok = 0, identical = 0, identical_but_top_bci = 0;
    uint64_t workload_pairs = 0, workload_match = 0;
};

// ASGCT's top frame is workload code (a groundtruth kernel), which is where the profile's numbers
// come from: there the decoder must match ASGCT (the top interpreted bci aside, by design).
bool workload_top(const CodeMap& map, const Oracle& o) {
    if (o.frames.empty()) return false;
    const MethodInfo* m = map.method_by_id(o.frames[0].method_id);
    return m && m->class_name.rfind("groundtruth/", 0) == 0;
}

ReplayResult replay(const std::string& file) {
    ReplayResult r;
    auto reader = RecordingReader::open(std::string(STACKFRAG_SOURCE_DIR) + "/tests/data/" + file);
    REQUIRE(reader.ok());
    CodeMap map;
    DecoderOptions options;
    options.use_libunwind = false;   // module files of the recording machine are not part of the test
    Decoder decoder(map, options);
    CallTrace trace;
    while (auto e = (*reader)->next()) {
        if (auto* s = std::get_if<Sample>(&*e)) {
            decoder.decode(*s, trace);
            ++r.samples;
            r.decoded += trace.status != TraceStatus::kFailed;
        } else if (auto* o = std::get_if<Oracle>(&*e)) {
            decoder.decode(o->sample, trace);
            ++r.samples;
            r.decoded += trace.status != TraceStatus::kFailed;
            r.oracle_decoded += trace.status != TraceStatus::kFailed;
            ++r.pairs;
            const Agreement a = compare_with_oracle(trace, *o);
            if (a == Agreement::kOracleFailed || a == Agreement::kDecoderFailed) continue;
            ++r.both_ok;
            r.identical += a == Agreement::kIdentical;
            const bool matches = a == Agreement::kIdentical ||
                                 (a == Agreement::kTopBciDiffers && trace.frames[0].kind == FrameKind::kInterpreted);
            r.identical_but_top_bci += matches;
            if (workload_top(map, *o)) {
                ++r.workload_pairs;
                r.workload_match += matches;
            }
        } else {
            map.apply(*e);
        }
    }
    CHECK_FALSE((*reader)->damage().has_value());
    return r;
}

// What a golden replay must show: its recording's sample and oracle counts, and how many oracle
// pairs may differ beyond an interpreted top frame's bci (each test names its known differences).
struct Expected {
    uint64_t samples, pairs;
    double decoded_share;          // of all samples; of the oracle's (Java threads') with java_threads_bound
    bool java_threads_bound;
    uint64_t min_both_ok, known_differences;
    uint64_t min_workload_pairs, known_workload_differences;
};

void check_golden(const std::string& file, const Expected& e) {
    const ReplayResult r = replay(file);
    CHECK(r.samples == e.samples);
    CHECK(r.pairs == e.pairs);
    if (e.java_threads_bound) {
        CHECK(double(r.oracle_decoded) >= e.decoded_share * double(r.pairs));
    } else {
        CHECK(double(r.decoded) >= e.decoded_share * double(r.samples));
    }
    CHECK(r.both_ok >= e.min_both_ok);
    CHECK(r.identical_but_top_bci + e.known_differences >= r.both_ok);
    CHECK(r.workload_pairs >= e.min_workload_pairs);
    CHECK(r.workload_match + e.known_workload_differences >= r.workload_pairs);
}

}  // namespace

TEST_CASE("golden replay: groundtruth on JDK 17", "[decoder][golden]") {
    check_golden("groundtruth-jdk17-validate.sfr", Expected{179, 30, 0.95, false, 26, 0, 5, 0});
}

// Debian 13's OpenJDK 21.0.13 (GT_SLICE_MS=300): the JDK 21 run the tests have where no JDK 21 is
// installed. Without libunwind (the module files are not part of the test) the compiler threads'
// native stacks stop early in this libjvm, so the Java threads' samples (the oracle's) are the bound.
// Four known differences, none in `stackfrag replay` (libunwind, decoding again after later code
// announcements): two samples in a workload method whose CodeLoad came after them (the frame is
// missing), and two with a native top frame the rbp chain alone cannot leave (Thread.start0 at the
// JVM's start, getThreadTotalCpuTime0).
TEST_CASE("golden replay: groundtruth on JDK 21", "[decoder][golden]") {
    check_golden("groundtruth-jdk21-validate.sfr", Expected{1020, 149, 0.95, true, 130, 4, 100, 2});
}

// Two known differences: a callee caught in its method-entry codelet (reported by the decoder, not
// by ASGCT) and a caller nmethod whose load event came after the sample.
TEST_CASE("golden replay: groundtruth on JDK 25", "[decoder][golden]") {
    check_golden("groundtruth-jdk25-validate.sfr", Expected{254, 52, 0.95, false, 48, 2, 10, 1});
}
