#include <sstream>

#include <catch2/catch.hpp>

#include "profile_test_support.hpp"
#include "stackfrag/profile/export.hpp"

using namespace sf;
using namespace sf::profile;
using namespace sf::profile::testing;

namespace {

std::string collapsed(const Cct& cct, Counter counter = Counter::kSamples) {
    std::ostringstream out;
    REQUIRE(write_collapsed(cct, out, counter).ok());
    return out.str();
}

Cct read(const std::string& text) {
    std::istringstream in(text);
    auto cct = read_collapsed(in);
    REQUIRE(cct.ok());
    return std::move(cct).value();
}

}  // namespace

TEST_CASE("collapsed stacks: root first, kind suffixes, call sites summed, sorted") {
    MethodTable names;
    names.add(method(1, "app/Main", "main"));
    names.add(method(2, "app/Main", "work"));
    names.add(method(3, "app/Main", "leaf"));
    names.add(method(4, "app/Main", "copy"));
    Cct cct(&names);
    for (int i = 0; i < 2; ++i) (void)cct.add(trace({compiled(3), compiled(2), interpreted(1, 5)}), 7);
    (void)cct.add(trace({inlined(2, 0), interpreted(1, 5)}));
    (void)cct.add(trace({inlined(2, 0), interpreted(1, 9)}));
    (void)cct.add(trace({native("memcpy"), java(FrameKind::kNativeWrapper, 4), interpreted(1, 12)}));
    (void)cct.add(trace({compiled(3)}, TraceStatus::kIncomplete));
    (void)cct.add(trace({native("vtable stub", 0, FrameKind::kStub), interpreted(1, 20)}));

    // Written out by hand: '[' sorts before 'a', "_[i]" before "_[j]".
    const std::string expected =
        "[truncated];app/Main.leaf_[j] 1\n"
        "app/Main.main_[0];app/Main.copy_[j];memcpy 1\n"
        "app/Main.main_[0];app/Main.work_[i] 2\n"
        "app/Main.main_[0];app/Main.work_[j];app/Main.leaf_[j] 2\n"
        "app/Main.main_[0];vtable stub 1\n";
    CHECK(collapsed(cct) == expected);
    CHECK(collapsed(cct, Counter::kWeight) == "app/Main.main_[0];app/Main.work_[j];app/Main.leaf_[j] 14\n");
}

TEST_CASE("collapsed stacks read back into a tree that writes the same text") {
    const std::string text =
        "[main tid=1];[truncated];java/lang/Thread.sleep_[j] 4\n"
        "[main tid=1];app/Main.main_[0];app/Main.work_[i];libc.so.6`write 3\n"
        "[main tid=1];app/Main.main_[0];app/Main.work_[j] 10\n"
        "[worker tid=2];app/Main.main_[0];[unknown] 1\n";
    Cct cct = read(text);
    CHECK(collapsed(cct) == text);
    CHECK(cct.total_samples() == 18);
    CHECK(cct.trace_counts().incomplete == 4);

    auto work_inlined = cct.find({"[main tid=1]", "app/Main.main", "app/Main.work"});
    REQUIRE(work_inlined.size() == 2);
    CHECK(cct.frame_of(work_inlined[0]).type == FrameType::kInlined);
    CHECK(cct.frame_of(work_inlined[1]).type == FrameType::kCompiled);
    CHECK(cct.node(work_inlined[1]).self_samples == 10);
    CHECK(cct.node(work_inlined[0]).total_samples == 3);
    auto thread = cct.find({"[main tid=1]"});
    REQUIRE(thread.size() == 1);
    CHECK(cct.frame_of(thread[0]).type == FrameType::kThread);
    CHECK(cct.node(thread[0]).total_samples == 17);
    auto truncated = cct.find({"[main tid=1]", "[truncated]"});
    REQUIRE(truncated.size() == 1);
    CHECK(cct.frame_of(truncated[0]).type == FrameType::kTruncated);
    auto unknown = cct.find({"[worker tid=2]", "app/Main.main", "[unknown]"});
    REQUIRE(unknown.size() == 1);
    CHECK(cct.frame_of(unknown[0]).type == FrameType::kNative);
    CHECK(cct.frame_of(cct.node(unknown[0]).parent).type == FrameType::kInterpreted);
}

TEST_CASE("collapsed stacks: repeated stacks add up, async-profiler's C1 marker reads as compiled") {
    Cct cct = read("# comment\n\na;b_[1] 2\na;b_[j] 3\r\n");
    CHECK(collapsed(cct) == "a;b_[j] 5\n");
}

TEST_CASE("collapsed stacks: malformed lines are errors naming the line") {
    for (const char* bad : {"a;b\n", "a;b 12x\n", " 5\n", "a;b -1\n"}) {
        std::istringstream in(std::string("ok 1\n") + bad);
        auto cct = read_collapsed(in);
        REQUIRE_FALSE(cct.ok());
        CHECK(cct.error().code == Errc::kCorrupt);
        CHECK_THAT(cct.error().message, Catch::Contains("line 2"));
    }
}

TEST_CASE("Java frames of unknown kind (mode=jvmti) are Java frames written without a kind suffix") {
    MethodTable names;
    names.add(method(1, "app/Main", "main"));
    names.add(method(2, "app/Main", "work"));
    Cct cct(&names);
    (void)cct.add(trace({java(FrameKind::kJava, 2, 3), java(FrameKind::kJava, 1, 5)}));
    (void)cct.add(trace({java(FrameKind::kJava, 2, 3), java(FrameKind::kJava, 1, 5)}));
    CHECK(collapsed(cct) == "app/Main.main;app/Main.work 2\n");
    const auto leaf = cct.find({"app/Main.main", "app/Main.work"});
    REQUIRE(leaf.size() == 1);
    const FrameDesc& frame = cct.frame_of(leaf[0]);
    CHECK(frame.type == FrameType::kJava);
    CHECK(is_java(frame.type));
    CHECK(std::string(frame_type_name(FrameType::kJava)) == "java");
    CHECK(frame_type_from_name("java") == FrameType::kJava);
    // The caller's bci is the call site, as for any Java frame.
    CHECK(cct.node(leaf[0]).call_bci == 5);
}

namespace {

// Both orders of write_collapsed for one tree and counter.
std::pair<std::string, std::string> both_orders(const Cct& cct, Counter counter) {
    std::ostringstream walked, sorted;
    REQUIRE(write_collapsed(cct, walked, counter, CollapsedOrder::kAuto).ok());
    REQUIRE(write_collapsed(cct, sorted, counter, CollapsedOrder::kFullSort).ok());
    return {walked.str(), sorted.str()};
}

}  // namespace

TEST_CASE("collapsed stacks: the tree walk writes the same bytes as sorting the whole lines, adversarial names") {
    // Names that are prefixes of each other and continue with bytes below and above ';' (' ', '!',
    // '0', ':' just below, '<' just above, '[', '~', UTF-8), equal texts from different frames
    // (a native and a stub frame with the same symbol), Java names with kind suffixes.
    MethodTable methods;
    methods.add(method(1, "a", "b"));      // "a.b_[j]" / "a.b_[i]" / "a.b_[0]"
    methods.add(method(2, "a", "b!"));
    methods.add(method(3, "a", "b_"));
    methods.add(method(4, "a.b", "c"));
    const std::vector<std::string> symbols = {"a", "a!", "a ", "a b", "a:", "a<", "a0", "a[", "a~", "a\xc3\xa9", "ab",
                                              "a.b_[j]", "a.b", "b", "[kernel]", "a.b!"};
    const std::vector<FrameKind> kinds = {FrameKind::kNative, FrameKind::kStub};
    for (uint64_t seed = 1; seed <= 40; ++seed) {
        Cct cct(&methods);
        uint64_t state = seed * 0x9E3779B97F4A7C15ull;
        auto next = [&](uint64_t n) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            return state % n;
        };
        for (int t = 0; t < 300; ++t) {
            std::vector<Frame> frames;
            const uint64_t depth = 1 + next(6);
            for (uint64_t d = 0; d < depth; ++d) {
                switch (next(4)) {
                    case 0: frames.push_back(compiled(1 + next(4), static_cast<int32_t>(next(3)))); break;
                    case 1: frames.push_back(next(2) ? inlined(1 + next(4)) : interpreted(1 + next(4), static_cast<int32_t>(next(3)))); break;
                    default: frames.push_back(native(symbols[next(symbols.size())], 0, kinds[next(2)])); break;
                }
            }
            (void)cct.add(trace(frames, next(10) == 0 ? TraceStatus::kIncomplete : TraceStatus::kComplete,
                                static_cast<uint32_t>(1 + next(2))),
                          1 + next(1000));
        }
        INFO("seed " << seed);
        for (Counter counter : {Counter::kSamples, Counter::kWeight}) {
            const auto [walked, sorted] = both_orders(cct, counter);
            CHECK(!walked.empty());
            CHECK(walked == sorted);
        }
    }
}

TEST_CASE("collapsed stacks: equal texts from different frames are one line in the walk, as in the sort") {
    Cct cct;
    (void)cct.add(trace({native("x"), native("a")}));
    (void)cct.add(trace({native("x"), native("a", 0, FrameKind::kStub)}), 0);
    (void)cct.add(trace({native("a!")}));
    (void)cct.add(trace({native("a", 0, FrameKind::kStub)}));
    const auto [walked, sorted] = both_orders(cct, Counter::kSamples);
    // By hand: "a" < "a!" < "a;x" ('!' < ';'): a's own line and its block are split by its
    // sibling; the stub's and the native's "a;x" are one line.
    CHECK(walked == "a 1\na! 1\na;x 2\n");
    CHECK(walked == sorted);
}

TEST_CASE("collapsed stacks: a name holding ';' falls back to sorting the whole lines") {
    Cct cct;
    (void)cct.add(trace({native("b"), native("a")}));
    (void)cct.add(trace({native("a;b")}));
    (void)cct.add(trace({native("a;a")}));
    const auto [walked, sorted] = both_orders(cct, Counter::kSamples);
    CHECK(walked == "a;a 1\na;b 2\n");
    CHECK(walked == sorted);
}
