// CodeMap's shortcuts for code lookups (a cache of live-code answers by pc, no lookup outside the
// span code was ever loaded at) must answer as a map asked for the first time does.
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <random>
#include <vector>

#include "synthetic.hpp"

using namespace sf;

namespace {
// Code of one of 16 methods at a 16-byte boundary of [base, base + span), 16 bytes and up to
// `extra_blocks` - 1 blocks of 16 more long, announced at `time_ns`.
CodeLoad random_load(std::mt19937_64& random, uint64_t time_ns, uint64_t base, uint64_t span, uint64_t extra_blocks) {
    CodeLoad load;
    load.time_ns = time_ns;
    load.method_id = test::method_id(static_cast<int>(random() % 16));
    load.code_begin = base + (random() % (span / 16)) * 16;
    load.code_end = load.code_begin + 16 + (random() % extra_blocks) * 16;
    load.entry = load.verified_entry = load.code_begin;
    load.frame_size_words = 4;
    return load;
}
}  // namespace

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
            const CodeLoad load = random_load(random, t, kBase, kSpan, 64);
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

namespace {
MethodInfo method_version(uint64_t time_ns, uint64_t method_id, uint64_t method_ptr) {
    MethodInfo m;
    m.time_ns = time_ns;
    m.method_id = method_id;
    m.method_ptr = method_ptr;
    return m;
}
}  // namespace

TEST_CASE("the code map's cached answers hold at every sample time and for every Method*, as a map that never cached",
          "[decoder]") {
    // find_code keeps its answers across method announcements and for later times the map answers
    // alike, method_by_ptr keeps those of Method*s with one version: code, stubs and Method*s
    // announced (again, at earlier and later times) and old entries forgotten, with lookups at
    // times before, at and after each event's, must get what a map given the same history answers.
    std::mt19937_64 random(11);
    constexpr uint64_t kBase = test::kCodeCacheLow + 0x10000;
    constexpr uint64_t kSpan = 0x2000;
    constexpr int kPtrs = 24;
    test::World warm;
    // The history as it was applied: an event, or (no event) forget_before at `forget`.
    struct Step {
        std::optional<Event> event;
        uint64_t forget = 0;
    };
    std::vector<Step> history;
    std::vector<std::pair<uint64_t, uint64_t>> loaded;   // begin, method id
    size_t code_checks = 0, method_checks = 0, versions_seen = 0;
    for (uint64_t t = 100; t < 100 + 20 * 250; t += 20) {
        const uint64_t kind = random() % 8;
        Step step;
        if (kind < 3) {
            // Announced late, sometimes after later events.
            const CodeLoad load = random_load(random, t - random() % 60, kBase, kSpan, 32);
            loaded.emplace_back(load.code_begin, load.method_id);
            step.event = Event{load};
        } else if (kind == 3 && !loaded.empty()) {
            const size_t i = random() % loaded.size();
            step.event = Event{CodeUnload{t, loaded[i].second, loaded[i].first}};
            loaded.erase(loaded.begin() + static_cast<long>(i));
        } else if (kind == 4) {
            Stub stub;
            stub.time_ns = t;
            stub.name = "stub";
            stub.begin = kBase + (random() % (kSpan / 16)) * 16;
            stub.end = stub.begin + 16 + (random() % 16) * 16;
            step.event = Event{stub};
        } else if (kind == 5 && t > 400) {
            step.forget = t - 300;
        } else {
            const uint64_t when = t - random() % 100;
            const int i = static_cast<int>(random() % kPtrs);
            step.event = Event{method_version(when, test::method_id(100 + static_cast<int>(random() % 1000)),
                                              test::method_ptr(100 + i))};
        }
        if (step.event) warm.map.apply(Event{*step.event});
        else warm.map.forget_before(step.forget);
        history.push_back(step);
        test::World fresh;
        for (const Step& s : history) {
            if (s.event) fresh.map.apply(Event{*s.event});
            else fresh.map.forget_before(s.forget);
        }
        const uint64_t times[] = {t - 70, t - 20, t, t + 1, t + 500};
        for (uint64_t when : times) {
            for (uint64_t pc = kBase - 32; pc < kBase + kSpan + 600; pc += 24) {
                const CodeLookup a = warm.map.find_code(pc, when);
                const CodeLookup b = fresh.map.find_code(pc, when);
                REQUIRE(a.region == b.region);
                REQUIRE((a.compiled == nullptr) == (b.compiled == nullptr));
                REQUIRE((a.stub == nullptr) == (b.stub == nullptr));
                if (a.compiled) {
                    REQUIRE(a.compiled->load.code_begin == b.compiled->load.code_begin);
                    REQUIRE(a.compiled->valid_from == b.compiled->valid_from);
                }
                if (a.stub) REQUIRE((a.stub->begin == b.stub->begin && a.stub->end == b.stub->end));
                ++code_checks;
            }
            for (int i = 0; i < kPtrs + 2; ++i) {
                const MethodInfo* a = warm.map.method_by_ptr(test::method_ptr(100 + i), when);
                const MethodInfo* b = fresh.map.method_by_ptr(test::method_ptr(100 + i), when);
                REQUIRE((a == nullptr) == (b == nullptr));
                if (a) {
                    REQUIRE(a->method_id == b->method_id);
                    REQUIRE(a->time_ns == b->time_ns);
                    ++versions_seen;
                }
                ++method_checks;
            }
        }
    }
    CHECK(code_checks > 100000);
    CHECK(method_checks > 20000);
    CHECK(versions_seen > method_checks / 2);
}

TEST_CASE("a cached code answer is reused only for the sample times its loads and unloads bound", "[decoder]") {
    // Decoding a recording against its whole map (bench_decode, replay with a deferral) asks for
    // the same pcs at times all over the history, in no order: a cached answer must serve exactly
    // the times between the load and unload times around it. Code loaded over, into and after
    // other code at the same pcs, announced late, unloaded; every (pc, time) asked in a shuffled
    // order of a warm map, against a fresh map for each time that is asked each pc once.
    std::mt19937_64 random(23);
    constexpr uint64_t kBase = test::kCodeCacheLow + 0x20000;
    constexpr uint64_t kSpan = 0x1000;
    std::vector<Event> events;
    std::vector<std::pair<uint64_t, uint64_t>> loaded;   // begin, method id
    for (uint64_t t = 1000; t < 1000 + 40 * 200; t += 40) {
        if (loaded.empty() || random() % 4 != 0) {
            // Announced late, sometimes after later events.
            const CodeLoad load = random_load(random, t - random() % 120, kBase, kSpan, 24);
            loaded.emplace_back(load.code_begin, load.method_id);
            events.push_back(Event{load});
        } else {
            const size_t i = random() % loaded.size();
            events.push_back(Event{CodeUnload{t, loaded[i].second, loaded[i].first}});
            loaded.erase(loaded.begin() + static_cast<long>(i));
        }
    }
    std::vector<uint64_t> times;
    for (uint64_t t = 900; t < 1000 + 40 * 200 + 200; t += 37) times.push_back(t);
    std::vector<uint64_t> pcs;
    for (uint64_t pc = kBase - 16; pc < kBase + kSpan + 400; pc += 8) pcs.push_back(pc);
    test::World warm;
    for (const Event& e : events) warm.map.apply(Event{e});
    struct Answer {
        CodeRegion region;
        uint64_t begin, valid_from;
    };
    const auto answer = [](const CodeLookup& c) {
        return Answer{c.region, c.compiled ? c.compiled->load.code_begin : 0, c.compiled ? c.compiled->valid_from : 0};
    };
    std::vector<std::vector<Answer>> expected(times.size());
    for (size_t ti = 0; ti < times.size(); ++ti) {
        test::World fresh;
        for (const Event& e : events) fresh.map.apply(Event{e});
        for (uint64_t pc : pcs) expected[ti].push_back(answer(fresh.map.find_code(pc, times[ti])));
    }
    std::vector<std::pair<size_t, size_t>> order;
    for (size_t ti = 0; ti < times.size(); ++ti) {
        for (size_t pi = 0; pi < pcs.size(); ++pi) order.emplace_back(ti, pi);
    }
    size_t compiled_answers = 0, answers_that_change = 0;
    for (size_t pi = 0; pi < pcs.size(); ++pi) {
        for (size_t ti = 1; ti < times.size(); ++ti) {
            if (expected[ti][pi].begin != expected[ti - 1][pi].begin ||
                expected[ti][pi].valid_from != expected[ti - 1][pi].valid_from) {
                ++answers_that_change;
            }
        }
    }
    for (int round = 0; round < 3; ++round) {
        std::shuffle(order.begin(), order.end(), random);
        for (const auto& [ti, pi] : order) {
            const Answer got = answer(warm.map.find_code(pcs[pi], times[ti]));
            const Answer& want = expected[ti][pi];
            INFO("pc " << pcs[pi] << " at " << times[ti]);
            REQUIRE(got.region == want.region);
            REQUIRE(got.begin == want.begin);
            REQUIRE(got.valid_from == want.valid_from);
            if (got.begin != 0) ++compiled_answers;
        }
    }
    CHECK(compiled_answers > order.size());       // most of three rounds' answers are code
    CHECK(answers_that_change > pcs.size() * 4);  // and they change over time at most pcs
}

TEST_CASE("a stub's memo belongs to that stub and is cleared when its range is announced anew", "[decoder]") {
    // The decoder files what a stub's name says (calls into the VM, no Java frame returns into it)
    // in the map's memo for the stub: a new stub elsewhere leaves it, a new name for the same
    // range must clear it, or the walk would judge return addresses by the old name.
    test::World w;
    const uint64_t a = test::kCodeCacheLow + 0x3000, b = test::kCodeCacheLow + 0x5000;
    w.map.apply(Event{Stub{1, "SafepointBlob", a, a + 0x100, 2}});
    const Stub* first = w.map.find_stub(a + 8);
    REQUIRE(first != nullptr);
    CHECK(w.map.stub_memo(first) == 0);
    w.map.stub_memo(first) = 7;
    for (int i = 0; i < 100; ++i) {   // enough to move the stubs' storage
        const uint64_t at = b + static_cast<uint64_t>(i) * 0x100;
        w.map.apply(Event{Stub{2, "vtable chunks", at, at + 0x80, -1}});
        CHECK(w.map.stub_memo(w.map.find_stub(at + 8)) == 0);
    }
    CHECK(w.map.stub_memo(w.map.find_stub(a + 8)) == 7);
    w.map.apply(Event{Stub{3, "resolve_static_call", a, a + 0x100, -1}});
    const Stub* renamed = w.map.find_stub(a + 8);
    REQUIRE(renamed->name == "resolve_static_call");
    CHECK(w.map.stub_memo(renamed) == 0);
}

TEST_CASE("a pc outside every range code was announced at is unknown at once, until code or a stub lands there",
          "[decoder]") {
    // Native frames' pcs skip the lookup cache (find_code answers them from the ranges alone): the
    // answer must be what a full lookup gives, the page still goes into the lookup log, and a
    // stub or code announced there later must be found.
    test::World w;
    constexpr uint64_t kNativePc = 0x7f12'3456'7000ull;   // far above the synthetic code cache
    REQUIRE(w.map.outside_all_code(kNativePc));
    CHECK_FALSE(w.map.outside_all_code(test::kCodeCacheLow + 0x5000));   // the code cache, unannounced
    CHECK_FALSE(w.map.outside_all_code(test::kInterpBodyPc));
    CHECK_FALSE(w.map.outside_all_code(test::kCallStubReturn));
    CodeMap::LookupKeys log;
    w.map.set_lookup_log(&log);
    CodeMap::TimeSpan span{5, 6};
    CHECK(w.map.find_code(kNativePc, 100, &span).region == CodeRegion::kUnknown);
    CHECK(span.from == 0);
    CHECK(span.until == ~uint64_t{0});
    CHECK(w.map.find_compiled(kNativePc, 100) == nullptr);
    w.map.set_lookup_log(nullptr);
    REQUIRE(log.count == 1);
    CHECK(log.keys[0] == CodeMap::page_key(kNativePc));

    // A stub generated outside the code cache (the ranges grow to hold it), then compiled code.
    w.map.apply(Event{Stub{110, "outside stub", kNativePc - 0x100, kNativePc + 0x100, -1}});
    CHECK_FALSE(w.map.outside_all_code(kNativePc));
    const CodeLookup stub = w.map.find_code(kNativePc, 120);
    REQUIRE(stub.region == CodeRegion::kStub);
    CHECK(stub.stub->name == "outside stub");
    constexpr uint64_t kLaterPc = kNativePc + 0x10'0000;
    CHECK(w.map.outside_all_code(kLaterPc));
    CodeLoad load;
    load.time_ns = 130;
    load.method_id = test::method_id(1);
    load.code_begin = kLaterPc - 0x40;
    load.code_end = kLaterPc + 0x40;
    load.entry = load.verified_entry = load.code_begin;
    load.frame_size_words = 4;
    w.map.apply(Event{load});
    CHECK_FALSE(w.map.outside_all_code(kLaterPc));
    CHECK(w.map.find_code(kLaterPc, 140).region == CodeRegion::kCompiled);
    CHECK(w.map.find_code(kLaterPc, 120).region == CodeRegion::kCompiled);   // a lagging load: found as before
    // Between the two, nothing: a full lookup, which says the same.
    CHECK(w.map.find_code(kNativePc + 0x8000, 140).region == CodeRegion::kUnknown);
}
