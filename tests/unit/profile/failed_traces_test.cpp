// No sample leaves the profile: a walk that failed part-way keeps the frames found before the
// failure under "[failed: reason]", an incomplete one under "[truncated]", in every output.
#include <sstream>

#include <catch2/catch.hpp>

#include "profile_test_support.hpp"
#include "stackfrag/profile/analysis.hpp"
#include "stackfrag/profile/export.hpp"
#include "stackfrag/profile/trace_filter.hpp"

using namespace sf;
using namespace sf::profile;
using namespace sf::profile::testing;

namespace {

MethodTable names() {
    MethodTable t;
    t.add(method(1, "app/Main", "main"));
    t.add(method(2, "app/Main", "work"));
    t.add(method(3, "app/Leaf", "spin"));
    return t;
}

CallTrace failed(std::vector<Frame> top_first, FailReason why) {
    CallTrace t = trace(std::move(top_first), TraceStatus::kFailed);
    t.failure = why;
    return t;
}

// Six samples: 2 complete, 1 incomplete, 2 failed part-way with their top frames, 1 failed at the top.
Cct six_samples(const MethodTable& table) {
    Cct cct(&table);
    cct.info().period_ns = 1'000'000;
    for (int i = 0; i < 2; ++i) (void)cct.add(trace({compiled(3), compiled(2), interpreted(1)}), 1'000'000);
    (void)cct.add(trace({compiled(3), compiled(2)}, TraceStatus::kIncomplete), 1'000'000);
    for (int i = 0; i < 2; ++i) (void)cct.add(failed({compiled(3), compiled(2)}, FailReason::kBadReturnAddress), 1'000'000);
    (void)cct.add(failed({}, FailReason::kUnknownPc), 1'000'000);
    return cct;
}

}  // namespace

TEST_CASE("failed traces keep their top frames under a marker naming the reason", "[failed]") {
    const MethodTable table = names();
    const Cct cct = six_samples(table);
    CHECK(cct.total_samples() == 6);   // every sample taken
    CHECK(cct.trace_counts().added == 3);
    CHECK(cct.trace_counts().failed == 3);
    CHECK(cct.trace_counts().failed_by_reason[size_t(FailReason::kBadReturnAddress)] == 2);
    const auto marker = cct.find({"[failed: bad_return_address]", "app/Main.work", "app/Leaf.spin"});
    REQUIRE(marker.size() == 1);
    CHECK(cct.node(marker[0]).self_samples == 2);
    const NodeId work = cct.node(marker[0]).parent;
    const NodeId failed_marker = cct.node(work).parent;
    CHECK(cct.frame(cct.node(failed_marker).frame).type == FrameType::kFailed);
    CHECK(cct.node(failed_marker).parent == kRootNode);
    const auto bare = cct.find({"[failed: unknown_pc]"});
    REQUIRE(bare.size() == 1);
    CHECK(cct.node(bare[0]).self_samples == 1);
    CHECK(failed_frame_reason("[failed: no_pc_desc]") == FailReason::kNoPcDesc);
    CHECK(!failed_frame_reason("[failed: no such reason]"));
}

TEST_CASE("failed and truncated stacks are in every output, totals equal to the samples", "[failed]") {
    const MethodTable table = names();
    const Cct cct = six_samples(table);

    std::ostringstream collapsed;
    REQUIRE(write_collapsed(cct, collapsed).ok());
    const std::string text = collapsed.str();
    CHECK(text.find("[failed: bad_return_address];app/Main.work_[j];app/Leaf.spin_[j] 2\n") != std::string::npos);
    CHECK(text.find("[failed: unknown_pc] 1\n") != std::string::npos);
    CHECK(text.find("[truncated];app/Main.work_[j];app/Leaf.spin_[j] 1\n") != std::string::npos);
    std::istringstream collapsed_in(text);
    Result<Cct> from_collapsed = read_collapsed(collapsed_in);
    REQUIRE(from_collapsed.ok());
    CHECK(from_collapsed->total_samples() == 6);
    CHECK(from_collapsed->trace_counts().failed == 3);
    CHECK(from_collapsed->trace_counts().failed_by_reason[size_t(FailReason::kUnknownPc)] == 1);
    CHECK(from_collapsed->trace_counts().added == 3);
    CHECK(from_collapsed->trace_counts().incomplete == 1);

    std::ostringstream json;
    REQUIRE(write_json(cct, json).ok());
    std::istringstream json_in(json.str());
    Result<Cct> from_json = read_json(json_in);
    REQUIRE(from_json.ok());
    CHECK(from_json->total_samples() == 6);
    const auto again = from_json->find({"[failed: bad_return_address]", "app/Main.work", "app/Leaf.spin"});
    REQUIRE(again.size() == 1);
    CHECK(from_json->frame(from_json->node(from_json->node(again[0]).parent).frame).type != FrameType::kFailed);
    CHECK(from_json->frame(from_json->node(from_json->path(again[0])[0]).frame).type == FrameType::kFailed);

    std::ostringstream html;
    REQUIRE(write_html(cct, html).ok());
    CHECK(html.str().find("[failed: bad_return_address]") != std::string::npos);
    CHECK(html.str().find("\"failed\"") != std::string::npos);   // a type of its own in the legend and colours

    // diff and query: the failed samples count, and the marker is a context frame, not a method.
    const ProfileComparison same = compare_profiles(cct, *from_collapsed);
    CHECK(same.samples_a == 6);
    CHECK(same.samples_b == 6);
    CHECK(same.overlap == Approx(1.0));
    bool marker_is_method = false;
    uint64_t spin_total = 0;
    for (const MethodTotal& m : method_totals(cct)) {
        marker_is_method = marker_is_method || m.name.starts_with("[failed");
        if (m.name == "app/Leaf.spin") spin_total = m.total;
    }
    CHECK(!marker_is_method);
    CHECK(spin_total == 5);   // 2 complete, 1 truncated, 2 failed part-way
}

TEST_CASE("a filter judges failed stacks by the frames they kept, as the live filter does", "[failed]") {
    const MethodTable table = names();
    const Cct cct = six_samples(table);
    Result<TraceFilter> filter = TraceFilter::parse(std::string("app.Main.work"), std::string());
    REQUIRE(filter.ok());
    FilterCounts dropped;
    const Cct kept = filter_cct(cct, *filter, &dropped);
    CHECK(dropped.not_in_focus == 1);   // the walk that failed at its first step has no frame at all
    CHECK(kept.total_samples() == 5);   // 2 complete + 1 truncated + 2 failed part-way
    CHECK(kept.trace_counts().added == 3);
    CHECK(kept.trace_counts().incomplete == 1);
    CHECK(kept.trace_counts().failed == 2);
    CHECK(kept.trace_counts().failed_by_reason[size_t(FailReason::kBadReturnAddress)] == 2);
    CHECK(kept.trace_counts().failed_by_reason[size_t(FailReason::kUnknownPc)] == 0);

    // The live filter, trace by trace, gives the same split.
    TraceFilter live = *filter;
    CHECK(live.judge(failed({compiled(3), compiled(2)}, FailReason::kBadReturnAddress), &table) == FilterVerdict::kKeep);
    CHECK(live.judge(failed({}, FailReason::kUnknownPc), &table) == FilterVerdict::kNotInFocus);

    Result<TraceFilter> exclude = TraceFilter::parse(std::string(), std::string("app.Leaf"));
    REQUIRE(exclude.ok());
    FilterCounts excluded;
    const Cct rest = filter_cct(cct, *exclude, &excluded);
    CHECK(excluded.excluded == 5);   // every stack through Leaf.spin, failed ones too
    CHECK(rest.total_samples() == 1);
    CHECK(rest.trace_counts().failed == 1);
}
