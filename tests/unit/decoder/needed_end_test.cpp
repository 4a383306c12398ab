// Decoder::needed_end: after a complete walk, the end of the stack bytes it read. The live agent
// cuts the thread's later fragments there (StackCutLearner), so a fragment cut at it must decode
// exactly as the whole one, on every complete sample of the recorded workloads.
#include <catch2/catch.hpp>

#include <string>

#include "stackfrag/decoder/decoder.hpp"
#include "stackfrag/events/recording.hpp"
#include "synthetic.hpp"

using namespace sf;
using namespace sf::test;

namespace {

void cut_at_needed_end(const std::string& file) {
    auto reader = RecordingReader::open(std::string(STACKFRAG_SOURCE_DIR) + "/tests/data/" + file);
    REQUIRE(reader.ok());
    CodeMap map;
    DecoderOptions o = test_options();
    o.use_libunwind = false;   // module files of the recording machine are not part of the test
    Decoder live(map, o);      // incremental, as the agent's
    DecoderOptions full_options = o;
    full_options.incremental = false;
    Decoder full(map, full_options);
    Decoder no_journal(map, full_options);
    size_t complete = 0, cut = 0, differing = 0, lower_changed = 0;
    uint64_t bytes = 0, kept = 0;
    while (auto e = (*reader)->next()) {
        const Sample* s = std::get_if<Sample>(&*e);
        if (s == nullptr) {
            map.apply(*e);
            continue;
        }
        const CallTrace trace = live.decode(*s);
        const uint64_t end = live.needed_end(s->tid);
        if (trace.status != TraceStatus::kComplete) {
            CHECK(end == 0);
            continue;
        }
        ++complete;
        (void)no_journal.decode(*s);
        CHECK(no_journal.needed_end(s->tid) == 0);   // only an incremental decoder knows
        if (end == 0) continue;   // a walk of its top frame alone
        REQUIRE(end > s->stack_sp);
        REQUIRE(end <= s->stack_sp + s->stack.size());
        ++cut;
        Sample shorter = *s;
        shorter.stack.resize(end - s->stack_sp);
        bytes += s->stack.size();
        kept += shorter.stack.size();
        differing += full.decode(shorter) != trace;
        // One word less: the highest word read is gone, and the walk must notice.
        shorter.stack.resize(shorter.stack.size() - 8);
        lower_changed += full.decode(shorter) != trace;
    }
    INFO(file << ": " << complete << " complete, " << cut << " cut, " << kept << " of " << bytes << " bytes kept");
    CHECK(cut > complete / 2);
    CHECK(differing == 0);
    CHECK(lower_changed > cut / 2);
    CHECK(kept < bytes);
}

}  // namespace

TEST_CASE("needed_end: a complete walk's fragment cut at its needed end decodes alike (JDK 17 recording)", "[decoder]") {
    cut_at_needed_end("groundtruth-jdk17-validate.sfr");
}

TEST_CASE("needed_end: a complete walk's fragment cut at its needed end decodes alike (JDK 21 recording)", "[decoder]") {
    cut_at_needed_end("groundtruth-jdk21-validate.sfr");
}

TEST_CASE("needed_end: a complete walk's fragment cut at its needed end decodes alike (JDK 25 recording)", "[decoder]") {
    cut_at_needed_end("groundtruth-jdk25-validate.sfr");
}
