#include <sstream>

#include <catch2/catch.hpp>

#include "profile_test_support.hpp"
#include "stackfrag/profile/analysis.hpp"
#include "stackfrag/profile/export.hpp"

using namespace sf;
using namespace sf::profile;
using namespace sf::profile::testing;

namespace {

Cct collapsed(const std::string& text) {
    std::istringstream in(text);
    auto cct = read_collapsed(in);
    REQUIRE(cct.ok());
    return std::move(cct).value();
}

const MethodTotal* find_total(const std::vector<MethodTotal>& totals, std::string_view name) {
    for (const auto& m : totals) {
        if (m.name == name) return &m;
    }
    return nullptr;
}

std::vector<std::pair<std::string, uint64_t>> pairs(const std::vector<WeightedName>& names) {
    std::vector<std::pair<std::string, uint64_t>> out;
    for (const auto& n : names) out.emplace_back(n.name, n.total);
    return out;
}

// a and b call each other: the 4 samples of main;a;b;a;b have a and b twice on the stack.
const char* const kRecursive =
    "main;a;b;a;b 4\n"
    "main;a 1\n"
    "main;c;b 2\n";

}  // namespace

TEST_CASE("method totals count a recursive method once per sample") {
    Cct cct = collapsed(kRecursive);
    std::vector<MethodTotal> totals = method_totals(cct);
    REQUIRE(totals.size() == 4);
    CHECK(totals[0].name == "main");   // by total descending
    CHECK(totals[0].total == 7);
    CHECK(totals[0].self == 0);
    const MethodTotal* a = find_total(totals, "a");
    REQUIRE(a != nullptr);
    CHECK(a->total == 5);   // 4 + 1, not 4 + 4 + 1
    CHECK(a->self == 1);
    const MethodTotal* b = find_total(totals, "b");
    REQUIRE(b != nullptr);
    CHECK(b->total == 6);   // 4 under a, 2 under c
    CHECK(b->self == 6);
    CHECK(find_total(totals, "c")->total == 2);
}

TEST_CASE("method totals merge the frame kinds of a method and skip thread frames") {
    Cct cct = collapsed(
        "[main tid=1];app/Main.run_[0];app/Main.work_[0] 2\n"
        "[main tid=1];app/Main.run_[j];app/Main.work_[i] 3\n"
        "[truncated];app/Main.work_[j] 1\n");
    std::vector<MethodTotal> totals = method_totals(cct);
    REQUIRE(totals.size() == 2);
    CHECK(totals[0].name == "app/Main.work");
    CHECK(totals[0].total == 6);
    CHECK(totals[0].self == 6);
    CHECK(totals[1].name == "app/Main.run");
    CHECK(totals[1].total == 5);

    ContextOptions kinds_kept;
    kinds_kept.merge_frame_kinds = false;
    std::vector<MethodTotal> by_kind = method_totals(cct, kinds_kept);
    CHECK(by_kind.size() == 5);
    CHECK(find_total(by_kind, "app/Main.work_[j]")->total == 1);
    CHECK(find_total(by_kind, "app/Main.work_[i]")->total == 3);
}

TEST_CASE("callers and callees with totals across all contexts") {
    Cct cct = collapsed(kRecursive);
    auto a = method_profile(cct, "a");
    REQUIRE(a.ok());
    CHECK(a->self == 1);
    CHECK(a->total == 5);
    // main->a in 5 samples, b->a in the 4 recursive ones.
    CHECK(pairs(a->callers) == std::vector<std::pair<std::string, uint64_t>>{{"main", 5}, {"b", 4}});
    // a->b twice on the stack of the same 4 samples: 4, not 8.
    CHECK(pairs(a->callees) == std::vector<std::pair<std::string, uint64_t>>{{"b", 4}});
    REQUIRE(a->contexts.size() == 2);
    CHECK(path_names(cct, a->contexts[0].node) == std::vector<std::string>{"main", "a"});
    CHECK(a->contexts[0].total == 5);
    CHECK(a->contexts[0].self == 1);
    CHECK(path_names(cct, a->contexts[1].node) == std::vector<std::string>{"main", "a", "b", "a"});
    CHECK(a->contexts[1].total == 4);

    CHECK(pairs(callers_of(cct, "b")) == std::vector<std::pair<std::string, uint64_t>>{{"a", 4}, {"c", 2}});
    CHECK(pairs(callees_of(cct, "b")) == std::vector<std::pair<std::string, uint64_t>>{{"a", 4}});
    CHECK(pairs(callers_of(cct, "main")) == std::vector<std::pair<std::string, uint64_t>>{{"[root]", 7}});
    CHECK(callees_of(cct, "c").size() == 1);

    auto missing = method_profile(cct, "nope");
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().code == Errc::kInvalidArgument);
}

TEST_CASE("callers of a thread's outermost method are the root unless threads are kept") {
    Cct cct = collapsed("[main tid=1];run;work 2\n[pool-1 tid=7];run;work 3\n");
    CHECK(pairs(callers_of(cct, "run")) == std::vector<std::pair<std::string, uint64_t>>{{"[root]", 5}});
    ContextOptions keep_threads;
    keep_threads.ignore_threads = false;
    CHECK(pairs(callers_of(cct, "run", keep_threads)) ==
          std::vector<std::pair<std::string, uint64_t>>{{"[pool-1 tid=7]", 3}, {"[main tid=1]", 2}});
}

TEST_CASE("methods are found by exact name first, then by substring") {
    Cct cct = collapsed("app/Main.work;app/Main.workHard 1\napp/Other.rework 1\n");
    CHECK(find_methods(cct, "app/Main.work") == std::vector<std::string>{"app/Main.work"});
    CHECK(find_methods(cct, "work") ==
          std::vector<std::string>{"app/Main.work", "app/Main.workHard", "app/Other.rework"});
    CHECK(find_methods(cct, "Hard") == std::vector<std::string>{"app/Main.workHard"});
    CHECK(find_methods(cct, "absent").empty());
}

TEST_CASE("hottest paths are the nodes with the most self samples") {
    Cct cct = collapsed(
        "main;work;leaf 6\n"
        "main;work 2\n"
        "main;idle 2\n");
    std::vector<HotPath> paths = hottest_paths(cct, 3);
    REQUIRE(paths.size() == 3);
    CHECK(path_names(cct, paths[0].node) == std::vector<std::string>{"main", "work", "leaf"});
    CHECK(paths[0].self == 6);
    // The tie of 2 goes to the older node: work was created by the first line, idle by the third.
    CHECK(path_names(cct, paths[1].node) == std::vector<std::string>{"main", "work"});
    CHECK(path_names(cct, paths[2].node) == std::vector<std::string>{"main", "idle"});
    CHECK(hottest_paths(cct, 100).size() == 3);   // main has no self samples
    CHECK(hottest_paths(cct, 0).empty());
}

TEST_CASE("a node id decodes to its full trace, also after a json round trip") {
    MethodTable names;
    names.add(method(1, "app/Main", "main"));
    names.add(method(2, "app/Main", "work"));
    Cct cct(&names);
    (void)cct.add(trace({native("memcpy"), compiled(2, 4), interpreted(1, 7)}));
    const NodeId leaf = *cct.find({"app/Main.main", "app/Main.work", "memcpy"}).begin();

    std::ostringstream out;
    REQUIRE(write_json(cct, out).ok());
    std::istringstream in(out.str());
    auto copy = read_json(in);
    REQUIRE(copy.ok());
    auto trace = trace_of(*copy, leaf);
    REQUIRE(trace.ok());
    REQUIRE(trace->size() == 3);
    CHECK(copy->frame_of((*trace)[0]).name == "app/Main.main");
    CHECK(copy->frame_of((*trace)[1]).name == "app/Main.work");
    CHECK(copy->node((*trace)[1]).call_bci == 7);
    CHECK(copy->frame_of((*trace)[2]).name == "memcpy");
    CHECK(trace->back() == leaf);

    auto root = trace_of(*copy, kRootNode);
    REQUIRE(root.ok());
    CHECK(root->empty());
    auto beyond = trace_of(*copy, copy->node_count());
    REQUIRE_FALSE(beyond.ok());
    CHECK(beyond.error().message.find("not in the profile") != std::string::npos);
}
