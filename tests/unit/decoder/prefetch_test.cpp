// Decoder::prefetch and StreamDecoder::prefetch ask for the next sample's fragment ahead of its
// decode (the live decoder does, peeking at its queue); they must change no trace, whatever sample
// they are given: the same traces as consuming the events one by one, and as replay's
// decode_recording.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "stackfrag/decoder/decoder.hpp"
#include "stackfrag/decoder/stream_decoder.hpp"
#include "stackfrag/events/recording.hpp"

using namespace sf;

namespace {

std::vector<Event> events_of(const std::string& file) {
    auto reader = RecordingReader::open(std::string(STACKFRAG_SOURCE_DIR) + "/tests/data/" + file);
    REQUIRE(reader.ok());
    std::vector<Event> events;
    while (auto e = (*reader)->next()) events.push_back(std::move(*e));
    return events;
}

StreamDecoderOptions options() {
    StreamDecoderOptions o;
    o.decoder.use_libunwind = false;   // module files of the recording machine are not part of the test
    return o;
}

// Samples no walk could use: prefetching them must neither fault nor change a later decode.
std::vector<Sample> hostile_samples() {
    std::vector<Sample> out;
    Sample empty;
    out.push_back(empty);
    Sample below;   // sp below the fragment
    below.stack.assign(4096, 0xab);
    below.stack_sp = 0x7000'0000;
    below.regs.sp = 0x6fff'f000;
    out.push_back(below);
    Sample above = below;   // sp past its end
    above.regs.sp = 0x7000'2000;
    out.push_back(above);
    Sample wrapping = below;   // a fragment that would run past the top of the address space
    wrapping.stack_sp = UINT64_MAX - 1024;
    wrapping.regs.sp = UINT64_MAX - 512;
    out.push_back(wrapping);
    return out;
}

void check_same_traces(const std::string& file) {
    const std::vector<Event> events = events_of(file);
    std::vector<CallTrace> traces[3];
    // 0: consumed one by one; 1: each preceded by the prefetch of the event after it, and by
    // prefetches of samples no walk could use; 2: decode_recording over the file (no prefetches).
    for (int mode = 0; mode < 2; ++mode) {
        StreamDecoder stream(options(), [&](const Event&, const CallTrace& t) { traces[mode].push_back(t); });
        const std::vector<Sample> hostile = hostile_samples();
        for (size_t i = 0; i < events.size(); ++i) {
            if (mode == 1) {
                if (i % 7 == 0) stream.prefetch(Event(hostile[i / 7 % hostile.size()]));
                if (i + 1 < events.size()) stream.prefetch(events[i + 1]);
            }
            stream.consume(Event(events[i]));
        }
        stream.flush();
    }
    {
        auto reader = RecordingReader::open(std::string(STACKFRAG_SOURCE_DIR) + "/tests/data/" + file);
        REQUIRE(reader.ok());
        StreamDecoder stream(options(), [&](const Event&, const CallTrace& t) { traces[2].push_back(t); });
        decode_recording(**reader, stream, nullptr);
    }
    REQUIRE(traces[0].size() > 100);
    REQUIRE(traces[1].size() == traces[0].size());
    REQUIRE(traces[2].size() == traces[0].size());
    size_t differing[3] = {};
    for (size_t i = 0; i < traces[0].size(); ++i) {
        differing[1] += traces[1][i] != traces[0][i];
        differing[2] += traces[2][i] != traces[0][i];
    }
    CHECK(differing[1] == 0);
    CHECK(differing[2] == 0);
}

}  // namespace

TEST_CASE("prefetching the next sample changes no trace (JDK 17 recording)", "[decoder][prefetch]") {
    check_same_traces("groundtruth-jdk17-validate.sfr");
}

TEST_CASE("prefetching the next sample changes no trace (JDK 21 recording)", "[decoder][prefetch]") {
    check_same_traces("groundtruth-jdk21-validate.sfr");
}

TEST_CASE("prefetching the next sample changes no trace (JDK 25 recording)", "[decoder][prefetch]") {
    check_same_traces("groundtruth-jdk25-validate.sfr");
}

TEST_CASE("a decoder asked to prefetch samples no walk could use decodes the next one as before", "[decoder][prefetch]") {
    CodeMap map;
    Decoder decoder(map);
    CallTrace trace;
    for (const Sample& s : hostile_samples()) {
        decoder.prefetch(s);
        decoder.prefetch(s);   // the same fragment twice: the second call replaces the first
        decoder.decode(s, trace);
        CHECK(trace.status == TraceStatus::kFailed);
    }
}
