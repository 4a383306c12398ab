#include <sstream>

#include <catch2/catch.hpp>

#include <algorithm>

#include "profile_test_support.hpp"
#include "stackfrag/profile/export.hpp"

using namespace sf;
using namespace sf::profile;
using namespace sf::profile::testing;

namespace {

std::string to_json(const Cct& cct) {
    std::ostringstream out;
    REQUIRE(write_json(cct, out).ok());
    return out.str();
}

Result<Cct> from_json(const std::string& text) {
    std::istringstream in(text);
    return read_json(in);
}

}  // namespace

TEST_CASE("the CCT json reads back with the same ids, frames, call sites and counts") {
    MethodTable names;
    names.add(method(1, "app/Main", "main", "([Ljava/lang/String;)V", {{0, 10}, {5, 11}, {9, 12}}, "Main.java"));
    names.add(method(2, "app/Main", "work", "()I", {{0, 20}}, "Main.java"));
    names.add(method(3, "app/Main", "say \"hi\"\\\n\x01\xff", "()V"));   // escaping and invalid UTF-8
    Cct cct(&names, CctOptions{.per_thread = true});
    cct.info().title = "round trip";
    cct.info().period_ns = 999;
    cct.set_thread_name(3, "main");
    // Added so that creation order differs from depth-first order.
    (void)cct.add(trace({compiled(2, 1), interpreted(1, 5)}, TraceStatus::kComplete, 3), 5);
    (void)cct.add(trace({native("memcpy"), interpreted(1, 9)}, TraceStatus::kComplete, 4), 7);
    (void)cct.add(trace({compiled(2, 1), interpreted(1, 9)}, TraceStatus::kComplete, 3), 11);
    (void)cct.add(trace({compiled(3)}, TraceStatus::kIncomplete, 3));
    CallTrace failed = trace({}, TraceStatus::kFailed);
    failed.failure = FailReason::kTooDeep;
    (void)cct.add(failed);

    std::string text = to_json(cct);
    auto back = from_json(text);
    REQUIRE(back.ok());
    const Cct& r = back.value();
    REQUIRE(r.node_count() == cct.node_count());
    for (NodeId id = 0; id < cct.node_count(); ++id) {
        const Node& a = cct.node(id);
        const Node& b = r.node(id);
        INFO("node " << id);
        CHECK(b.parent == a.parent);
        CHECK(b.call_bci == a.call_bci);
        CHECK(b.call_line == a.call_line);
        CHECK(b.self_samples == a.self_samples);
        CHECK(b.total_samples == a.total_samples);
        CHECK(b.self_weight == a.self_weight);
        CHECK(b.total_weight == a.total_weight);
        CHECK(std::ranges::equal(r.children(id), cct.children(id)));
        if (id != kRootNode && cct.frame_of(id).name.find('\xff') == std::string::npos) {
            CHECK(r.frame_of(id) == cct.frame_of(id));
        }
    }
    CHECK(r.info().title == "round trip");
    CHECK(r.info().period_ns == 999);
    CHECK(r.trace_counts().added == 4);
    CHECK(r.trace_counts().incomplete == 1);
    CHECK(r.trace_counts().failed == 1);
    CHECK(r.trace_counts().failed_by_reason[static_cast<size_t>(FailReason::kTooDeep)] == 1);
    auto odd = r.find({"[main tid=3]", "[truncated]", "app/Main.say \"hi\"\\\n\x01\xEF\xBF\xBD"});
    CHECK(odd.size() == 1);
    CHECK(to_json(r) == text);
}

TEST_CASE("json that is not a consistent CCT is refused with kCorrupt") {
    const char* bad[] = {
        "not json",
        "{\"format\":\"other\",\"version\":1,\"root\":{}}",
        "{\"format\":\"stackfrag-cct\",\"version\":1}",
        // a total that is not the sum below it
        "{\"format\":\"stackfrag-cct\",\"version\":1,\"root\":{\"id\":0,\"name\":\"[root]\",\"type\":\"root\",\"self\":0,"
        "\"total\":5,\"children\":[{\"id\":1,\"name\":\"a\",\"type\":\"native\",\"self\":2,\"total\":2}]}}",
        // an id gap
        "{\"format\":\"stackfrag-cct\",\"version\":1,\"root\":{\"id\":0,\"name\":\"[root]\",\"type\":\"root\",\"self\":0,"
        "\"total\":2,\"children\":[{\"id\":2,\"name\":\"a\",\"type\":\"native\",\"self\":2,\"total\":2}]}}",
        // a member of the wrong type
        "{\"format\":\"stackfrag-cct\",\"version\":1,\"root\":{\"id\":0,\"name\":\"[root]\",\"type\":\"root\",\"self\":\"x\"}}",
        "{\"format\":\"stackfrag-cct\",\"version\":1,\"root\":{\"id\":0,\"name\":\"[root]\",\"type\":\"bogus\"}}",
    };
    for (const char* text : bad) {
        INFO(text);
        auto r = from_json(text);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == Errc::kCorrupt);
    }
    auto future = from_json("{\"format\":\"stackfrag-cct\",\"version\":2,\"root\":{}}");
    REQUIRE_FALSE(future.ok());
    CHECK(future.error().code == Errc::kUnsupported);
}
