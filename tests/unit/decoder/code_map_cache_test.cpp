// CodeMap's shortcuts for code lookups (a cache of live-code answers by pc, no lookup outside the
// span code was ever loaded at) must answer as a map asked for the first time does.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "synthetic.hpp"

using namespace sf;

TEST_CASE("the code map's cached answers follow every load and unload, as a map that never cached", "[decoder]") {
    // Blocks of code loaded over and into each other (a new blob overlapping older ones retires
    // them, as a reused CodeCache range does) and unloaded, with lookups all over the range between
    // events: after each event the warm map must answer every pc as a map given the same events
    // and asked for the first time.
    std::mt19937_64 random(7);
    constexpr uint64_t kBase = test::kCodeCacheLow + 0x10000;
    constexpr uint64_t kSpan = 0x4000;
    test::World warm;
    std::vector<Event> events;
    struct Loaded {
        uint64_t begin, method;
    };
    std::vector<Loaded> loaded;
    size_t checked = 0, compiled_answers = 0;
    for (uint64_t t = 10; t < 10 + 300; ++t) {
        if (loaded.empty() || random() % 3 != 0) {
            CodeLoad load;
            load.time_ns = t;
            load.method_id = test::method_id(static_cast<int>(random() % 16));
            load.code_begin = kBase + (random() % (kSpan / 16)) * 16;
            load.code_end = load.code_begin + 16 + (random() % 64) * 16;
            load.entry = load.verified_entry = load.code_begin;
            load.frame_size_words = 4;
            loaded.push_back({load.code_begin, load.method_id});
            events.push_back(Event{load});
        } else {
            const size_t i = random() % loaded.size();
            events.push_back(Event{CodeUnload{t, loaded[i].method, loaded[i].begin}});
            loaded.erase(loaded.begin() + static_cast<long>(i));
        }
        warm.map.apply(Event{events.back()});
        test::World fresh;
        for (const Event& e : events) fresh.map.apply(Event{e});
        // From below the first code ever loaded to above the last: the span's edges included.
        for (uint64_t pc = kBase - 64; pc < kBase + kSpan + 1100; pc += 8) {
            const CodeLookup a = warm.map.find_code(pc, t);
            const CodeLookup b = fresh.map.find_code(pc, t);
            REQUIRE(a.region == b.region);
            REQUIRE((a.compiled == nullptr) == (b.compiled == nullptr));
            if (a.compiled) {
                REQUIRE(a.compiled->load.code_begin == b.compiled->load.code_begin);
                REQUIRE(a.compiled->valid_from == b.compiled->valid_from);
                ++compiled_answers;
            }
            ++checked;
        }
    }
    CHECK(checked > 100000);
    CHECK(compiled_answers > checked / 4);
}
