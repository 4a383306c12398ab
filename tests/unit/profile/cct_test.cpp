#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "profile_test_support.hpp"

using namespace sf;
using namespace sf::profile;
using namespace sf::profile::testing;

namespace {

// app/Main.main calls app/Main.work at bci 5 (line 11) and bci 9 (line 12); work calls leaf.
MethodTable main_work_leaf() {
    MethodTable t;
    t.add(method(1, "app/Main", "main", "([Ljava/lang/String;)V", {{0, 10}, {5, 11}, {9, 12}}, "Main.java"));
    t.add(method(2, "app/Main", "work", "()I", {{0, 20}, {3, 21}}, "Main.java"));
    t.add(method(3, "app/Main", "leaf", "()I", {{0, 30}}, "Main.java"));
    return t;
}

}  // namespace

TEST_CASE("one callee called from two call sites of its caller is two nodes with their lines") {
    MethodTable names = main_work_leaf();
    Cct cct(&names);
    auto a = cct.add(trace({compiled(2, 0), interpreted(1, 5)}));
    auto b = cct.add(trace({compiled(2, 0), interpreted(1, 9)}));
    auto c = cct.add(trace({compiled(2, 7), interpreted(1, 9)}));   // work's own bci does not split it
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(c);
    CHECK(*a != *b);
    CHECK(*b == *c);
    CHECK(cct.node(*a).call_bci == 5);
    CHECK(cct.node(*a).call_line == 11);
    CHECK(cct.node(*b).call_bci == 9);
    CHECK(cct.node(*b).call_line == 12);
    CHECK(cct.node(*a).parent == cct.node(*b).parent);

    auto works = cct.find({"app/Main.main", "app/Main.work"});
    CHECK(works.size() == 2);
    auto mains = cct.find({"app/Main.main"});
    REQUIRE(mains.size() == 1);
    CHECK(cct.node(mains[0]).call_bci == -1);
    CHECK(cct.node(mains[0]).total_samples == 3);
}

TEST_CASE("self and total counts and weights") {
    MethodTable names = main_work_leaf();
    Cct cct(&names);
    for (int i = 0; i < 3; ++i) (void)cct.add(trace({compiled(3, 1), compiled(2, 3), compiled(1, 5)}), 10);
    (void)cct.add(trace({compiled(2, 3), compiled(1, 5)}), 100);
    (void)cct.add(trace({compiled(1, 5)}), 1000);

    auto main_node = cct.find({"app/Main.main"});
    auto work = cct.find({"app/Main.main", "app/Main.work"});
    auto leaf = cct.find({"app/Main.main", "app/Main.work", "app/Main.leaf"});
    REQUIRE(main_node.size() == 1);
    REQUIRE(work.size() == 1);
    REQUIRE(leaf.size() == 1);
    CHECK(cct.node(main_node[0]).self_samples == 1);
    CHECK(cct.node(main_node[0]).total_samples == 5);
    CHECK(cct.node(work[0]).self_samples == 1);
    CHECK(cct.node(work[0]).total_samples == 4);
    CHECK(cct.node(leaf[0]).self_samples == 3);
    CHECK(cct.node(leaf[0]).total_samples == 3);
    CHECK(cct.node(leaf[0]).call_line == 21);
    CHECK(cct.node(main_node[0]).self_weight == 1000);
    CHECK(cct.node(main_node[0]).total_weight == 1130);
    CHECK(cct.node(work[0]).total_weight == 130);
    CHECK(cct.total_samples() == 5);
    CHECK(cct.total_weight() == 1130);
    CHECK(cct.trace_counts().added == 5);
}

TEST_CASE("per-thread trees put a thread frame under the root, merged trees do not") {
    MethodTable names = main_work_leaf();
    auto feed = [](Cct& cct) {
        cct.set_thread_name(7, "main");
        (void)cct.add(trace({compiled(2, 0), compiled(1, 5)}, TraceStatus::kComplete, 7));
        (void)cct.add(trace({compiled(2, 0), compiled(1, 5)}, TraceStatus::kComplete, 8));
        (void)cct.add(trace({compiled(1, 5)}, TraceStatus::kComplete, 7));
    };
    Cct merged(&names);
    feed(merged);
    REQUIRE(merged.children(kRootNode).size() == 1);
    CHECK(merged.frame_of(merged.children(kRootNode)[0]).name == "app/Main.main");
    CHECK(merged.find({"app/Main.main", "app/Main.work"}).size() == 1);
    CHECK(merged.node(merged.find({"app/Main.main"})[0]).total_samples == 3);

    Cct threads(&names, CctOptions{.per_thread = true});
    feed(threads);
    REQUIRE(threads.children(kRootNode).size() == 2);
    auto t7 = threads.find({"[main tid=7]", "app/Main.main"});
    auto t8 = threads.find({"[tid=8]", "app/Main.main"});
    REQUIRE(t7.size() == 1);
    REQUIRE(t8.size() == 1);
    CHECK(threads.node(t7[0]).total_samples == 2);
    CHECK(threads.node(t8[0]).total_samples == 1);
    CHECK(threads.frame_of(threads.node(t7[0]).parent).type == FrameType::kThread);
}

TEST_CASE("a thread pool's name is its threads' name with the trailing number as '*'") {
    CHECK(thread_pool_name("http-nio-8080-exec-12") == "http-nio-8080-exec-*");
    CHECK(thread_pool_name("GC Thread#3") == "GC Thread#*");
    CHECK(thread_pool_name("nioEventLoopGroup-3-2") == "nioEventLoopGroup-3-*");
    CHECK(thread_pool_name("C2 CompilerThread0") == "C2 CompilerThread*");
    CHECK(thread_pool_name("main") == "main");
    CHECK(thread_pool_name("http-nio-8080-Poller") == "http-nio-8080-Poller");
    CHECK(thread_pool_name("42") == "*");
    CHECK(thread_pool_name("") == "");
}

TEST_CASE("per pool, the threads of one pool share a subtree; a thread named late goes there from then on") {
    MethodTable names = main_work_leaf();
    Cct pools(&names, CctOptions{.per_thread = true, .per_pool = true});
    pools.set_thread_name(11, "exec-1");
    pools.set_thread_name(12, "exec-2");
    pools.set_thread_name(13, "Poller");
    (void)pools.add(trace({compiled(2, 0), compiled(1, 5)}, TraceStatus::kComplete, 11));
    (void)pools.add(trace({compiled(2, 0), compiled(1, 5)}, TraceStatus::kComplete, 12));
    (void)pools.add(trace({compiled(1, 5)}, TraceStatus::kComplete, 13));
    (void)pools.add(trace({compiled(1, 5)}, TraceStatus::kComplete, 14));   // not named yet
    pools.set_thread_name(14, "exec-3");
    (void)pools.add(trace({compiled(1, 5)}, TraceStatus::kComplete, 14));
    REQUIRE(pools.children(kRootNode).size() == 3);
    const auto exec = pools.find({"[exec-*]", "app/Main.main"});
    REQUIRE(exec.size() == 1);
    CHECK(pools.node(exec[0]).total_samples == 3);
    CHECK(pools.find({"[exec-*]", "app/Main.main", "app/Main.work"}).size() == 1);
    const auto poller = pools.find({"[Poller]", "app/Main.main"});
    REQUIRE(poller.size() == 1);
    CHECK(pools.node(poller[0]).total_samples == 1);
    const auto unnamed = pools.find({"[unnamed threads]", "app/Main.main"});
    REQUIRE(unnamed.size() == 1);
    CHECK(pools.node(unnamed[0]).total_samples == 1);

    // Per thread, the same: a thread named after its first sample gets its own named subtree then.
    Cct threads(&names, CctOptions{.per_thread = true});
    (void)threads.add(trace({compiled(1, 5)}, TraceStatus::kComplete, 14));
    threads.set_thread_name(14, "exec-3");
    (void)threads.add(trace({compiled(1, 5)}, TraceStatus::kComplete, 14));
    CHECK(threads.find({"[tid=14]", "app/Main.main"}).size() == 1);
    CHECK(threads.find({"[exec-3 tid=14]", "app/Main.main"}).size() == 1);
}

TEST_CASE("method ids that name the same method merge; other signatures, kinds and unknown ids do not") {
    MethodTable names;
    names.add(method(100, "app/A", "run"));
    names.add(method(200, "app/A", "run"));          // the class was redefined: a new jmethodID
    names.add(method(300, "app/A", "run", "(I)V"));   // an overload
    Cct cct(&names);
    auto first = cct.add(trace({compiled(100)}));
    auto second = cct.add(trace({compiled(200)}));
    auto overload = cct.add(trace({compiled(300)}));
    auto interp = cct.add(trace({interpreted(100)}));
    auto unknown = cct.add(trace({compiled(999)}));
    auto unknown2 = cct.add(trace({compiled(998)}));
    REQUIRE((first && second && overload && interp && unknown && unknown2));
    CHECK(*first == *second);
    CHECK(cct.node(*first).total_samples == 2);
    CHECK(*overload != *first);
    CHECK(cct.frame_of(*overload).signature == "(I)V");
    CHECK(*interp != *first);
    CHECK(cct.frame_of(*interp).type == FrameType::kInterpreted);
    CHECK(*unknown != *unknown2);
    CHECK(cct.frame_of(*unknown).name == "[unknown_method 0x3e7]");
}

TEST_CASE("native frames are kept by symbol, whatever their pc") {
    MethodTable names = main_work_leaf();
    Cct cct(&names);
    auto a = cct.add(trace({native("memcpy", 0x1000), native("JVM_ArrayCopy", 0x2000), compiled(1, 5)}));
    auto b = cct.add(trace({native("memcpy", 0x1044), native("JVM_ArrayCopy", 0x2010), compiled(1, 5)}));
    auto c = cct.add(trace({native("", 0x9000), compiled(1, 5)}));
    auto d = cct.add(trace({native("StubRoutines::arraycopy", 0x3000, FrameKind::kStub), compiled(1, 5)}));
    REQUIRE((a && b && c && d));
    CHECK(*a == *b);
    CHECK(path_names(cct, *a) == std::vector<std::string>{"app/Main.main", "JVM_ArrayCopy", "memcpy"});
    CHECK(cct.node(*a).call_bci == -1);   // a native caller has no bci
    CHECK(cct.node(cct.node(*a).parent).call_bci == 5);
    CHECK(cct.frame_of(*c).name == "[unknown]");
    CHECK(cct.frame_of(*d).type == FrameType::kStub);
    // The same pc under another symbol (a library unloaded, another mapped there; a stub at an
    // address native code had) is another frame, and the first one's frame is found again after.
    auto e = cct.add(trace({native("other_memcpy", 0x1000), compiled(1, 5)}));
    auto f = cct.add(trace({native("memcpy", 0x1000, FrameKind::kStub), compiled(1, 5)}));
    auto g = cct.add(trace({native("", 0x1000), compiled(1, 5)}));
    auto h = cct.add(trace({native("memcpy", 0x1000), native("JVM_ArrayCopy", 0x2000), compiled(1, 5)}));
    REQUIRE((e && f && g && h));
    CHECK(cct.frame_of(*e).name == "other_memcpy");
    CHECK(cct.frame_of(*f).type == FrameType::kStub);
    CHECK(cct.frame_of(*f).name == "memcpy");
    CHECK(cct.frame_of(*g).name == "[unknown]");
    CHECK(*h == *a);
}

TEST_CASE("failed traces go under [failed: reason], incomplete ones under [truncated]") {
    MethodTable names = main_work_leaf();
    Cct cct(&names, CctOptions{.per_thread = true});
    CallTrace failed = trace({compiled(2)}, TraceStatus::kFailed);
    failed.failure = FailReason::kUnknownPc;
    const auto f1 = cct.add(failed);
    const auto f2 = cct.add(failed);
    REQUIRE(f1);
    CHECK(f1 == f2);
    CHECK(path_names(cct, *f1) == std::vector<std::string>{"[tid=1]", "[failed: unknown_pc]", "app/Main.work"});
    CHECK(cct.frame_of(cct.path(*f1)[1]).type == FrameType::kFailed);
    auto cut = cct.add(trace({compiled(3, 0), compiled(2, 3)}, TraceStatus::kIncomplete, 5));
    REQUIRE(cut);
    CHECK(path_names(cct, *cut) == std::vector<std::string>{"[tid=5]", "[truncated]", "app/Main.work", "app/Main.leaf"});
    CHECK(cct.frame_of(cct.path(*cut)[1]).type == FrameType::kTruncated);
    CHECK(cct.total_samples() == 3);
    CHECK(cct.trace_counts().added == 1);
    CHECK(cct.trace_counts().incomplete == 1);
    CHECK(cct.trace_counts().failed == 2);
    CHECK(cct.trace_counts().failed_by_reason[static_cast<size_t>(FailReason::kUnknownPc)] == 2);
}

TEST_CASE("node ids stay the same as traces are added and merged, and give back their path") {
    MethodTable names = main_work_leaf();
    Cct cct(&names);
    std::vector<std::pair<NodeId, std::vector<std::string>>> seen;
    auto remember = [&](const CallTrace& t, std::vector<std::string> expected_path) {
        auto id = cct.add(t);
        REQUIRE(id);
        seen.emplace_back(*id, std::move(expected_path));
    };
    remember(trace({compiled(3, 0), compiled(2, 3), compiled(1, 5)}),
             {"app/Main.main", "app/Main.work", "app/Main.leaf"});
    remember(trace({compiled(2, 3), compiled(1, 9)}), {"app/Main.main", "app/Main.work"});
    remember(trace({native("write"), compiled(1, 9)}), {"app/Main.main", "write"});

    Cct other(&names);
    (void)other.add(trace({native("read"), compiled(3, 0), compiled(1, 5)}));
    (void)other.add(trace({compiled(3, 0), compiled(2, 3), compiled(1, 5)}));
    size_t before = cct.node_count();
    cct.merge(other);
    CHECK(cct.node_count() == before + 2);   // main->leaf(bci 5) and its read; the rest matched
    for (const auto& [id, expected] : seen) {
        CHECK(path_names(cct, id) == expected);
        std::vector<NodeId> p = cct.path(id);
        REQUIRE(!p.empty());
        CHECK(p.back() == id);
        CHECK(cct.node(p.front()).parent == kRootNode);
        CHECK(cct.node(id).depth == p.size());
    }
    CHECK(cct.node(seen[0].first).total_samples == 2);
    CHECK(cct.total_samples() == 5);
    CHECK(cct.trace_counts().added == 5);
}

namespace {
// Every node's path of frame names and call bcis, its self and total counts: what two trees must
// share to be the same tree, whatever their ids.
std::map<std::string, std::pair<uint64_t, uint64_t>> shape_of(const Cct& cct) {
    std::map<std::string, std::pair<uint64_t, uint64_t>> out;
    cct.visit([&](NodeId id, const Node& n) {
        std::string key;
        for (NodeId p : cct.path(id)) {
            key += cct.frame_of(p).name + "@" + std::to_string(cct.node(p).call_bci) + ":" +
                   std::to_string(cct.node(p).call_line) + frame_type_name(cct.frame_of(p).type) + ";";
        }
        out[key] = {n.self_samples, n.total_samples};
    });
    return out;
}
}  // namespace

TEST_CASE("a thread's trace that shares outer frames with its last one lands where a fresh lookup puts it") {
    // add() takes the nodes of the outer frames a thread's last trace had too. A sequence with
    // changes at every depth (a frame's bci, kind, method or symbol; a shorter and a longer stack;
    // a failed and an incomplete trace; another thread in between; a method announced only after
    // its first frames) must give the tree that adding every trace as a thread of its own gives.
    MethodTable names_a = main_work_leaf(), names_b = main_work_leaf();
    Cct reused(&names_a), fresh(&names_b);
    const std::vector<CallTrace> traces = {
        trace({compiled(3, 1), compiled(2, 3), interpreted(1, 5)}),
        trace({compiled(3, 2), compiled(2, 3), interpreted(1, 5)}),
        trace({compiled(3, 2), compiled(2, 4), interpreted(1, 5)}),   // work's bci: leaf's call site
        trace({compiled(3, 2), compiled(2, 4), interpreted(1, 9)}),   // main's bci: work's call site
        trace({native("memcpy"), native("JVM_ArrayCopy"), compiled(2, 4), interpreted(1, 9)}),
        trace({native("memmove"), native("JVM_ArrayCopy"), compiled(2, 4), interpreted(1, 9)}),
        trace({native("memmove"), native("JVM_ArrayCopy"), inlined(2, 4), interpreted(1, 9)}),
        trace({interpreted(1, 9)}),
        trace({compiled(3, 2), compiled(2, 4), interpreted(1, 9)}, TraceStatus::kIncomplete),
        trace({compiled(3, 2), compiled(2, 4), interpreted(1, 9)}, TraceStatus::kComplete, 2),
        trace({compiled(3, 2), compiled(2, 4), interpreted(1, 9)}),
        trace({compiled(3, 2), compiled(9, 4), interpreted(1, 9)}),   // method 9: not announced yet
        trace({compiled(3, 2), compiled(9, 4), interpreted(1, 9)}),
        trace({compiled(3, 2), compiled(9, 4), interpreted(1, 9)}),   // announced before this one
        trace({compiled(3, 2), compiled(9, 4), interpreted(1, 9)}, TraceStatus::kFailed),
        trace({compiled(3, 3), compiled(9, 4), interpreted(1, 9)}),
        trace({native(""), compiled(3, 3), compiled(9, 4), interpreted(1, 9)}),
    };
    uint32_t unique_tid = 1000;
    for (size_t i = 0; i < traces.size(); ++i) {
        if (i == 13) {
            names_a.add(method(9, "app/Main", "late", "()V", {{0, 90}}));
            names_b.add(method(9, "app/Main", "late", "()V", {{0, 90}}));
        }
        (void)reused.add(traces[i]);
        CallTrace alone = traces[i];
        alone.tid = unique_tid++;
        (void)fresh.add(alone);
        INFO("after trace " << i);
        REQUIRE(shape_of(reused) == shape_of(fresh));
    }
    CHECK(reused.node_count() == fresh.node_count());
    CHECK(!reused.find({"app/Main.main", "app/Main.late"}).empty());
}

TEST_CASE("frames of methods announced without names get their names from resolve_names, twins merging") {
    MethodTable names = main_work_leaf();
    names.add(method(2, "", "", ""));    // work: announced by a MethodBatch, not named yet
    names.add(method(4, "", "", ""));    // another loader's copy of app/Main.leaf, not named yet
    Cct cct(&names, CctOptions{false, true});
    auto a = cct.add(trace({interpreted(2, 7), interpreted(1, 5)}));
    auto b = cct.add(trace({compiled(3, 0), interpreted(2, 3), interpreted(1, 5)}));
    auto c = cct.add(trace({compiled(4, 0), interpreted(2, 3), interpreted(1, 5)}));
    REQUIRE((a && b && c));
    CHECK(cct.frame_of(*a).name == "[unknown_method 0x2]");
    CHECK(cct.node(*a).call_line == 11);   // main's line table is known
    CHECK(cct.node(*b).call_line == 0);    // work's is not yet
    CHECK(*b != *c);
    CHECK(cct.unnamed_methods() == std::vector<uint64_t>{2, 4});
    CHECK_FALSE(cct.resolve_names());      // nothing named since

    names.add(method(2, "app/Main", "work", "()I", {{0, 20}, {3, 21}}, "Main.java"));
    names.add(method(4, "app/Main", "leaf", "()I", {{0, 30}}, "Main.java"));
    REQUIRE(cct.resolve_names());
    CHECK(cct.unnamed_methods().empty());
    const auto leaves = cct.find({"app/Main.main", "app/Main.work", "app/Main.leaf"});
    REQUIRE(leaves.size() == 1);
    CHECK(cct.node(leaves[0]).total_samples == 2);
    CHECK(cct.node(leaves[0]).call_bci == 3);
    CHECK(cct.node(leaves[0]).call_line == 21);
    const auto works = cct.find({"app/Main.main", "app/Main.work"});
    REQUIRE(works.size() == 1);
    CHECK(cct.node(works[0]).self_samples == 1);
    CHECK(cct.node(works[0]).total_samples == 3);
    CHECK(cct.frame_of(works[0]).source_file == "Main.java");
    CHECK(cct.frame_of(works[0]).first_line == 20);
    CHECK(cct.total_samples() == 3);
    CHECK(cct.trace_counts().added == 3);
    // The kept samples point into the new tree, with the lines the names brought.
    REQUIRE(cct.samples().size() == 3);
    CHECK(cct.samples()[0].node == works[0]);
    CHECK(cct.samples()[1].node == leaves[0]);
    CHECK(cct.samples()[2].node == leaves[0]);
    CHECK(cct.samples()[2].line == 30);
    // Later traces of either id find the merged nodes.
    auto d = cct.add(trace({compiled(4, 0), interpreted(2, 3), interpreted(1, 5)}));
    REQUIRE(d);
    CHECK(*d == leaves[0]);
    CHECK_FALSE(cct.resolve_names());
}

TEST_CASE("resolve_names leaves frames whose methods are still unnamed, and names them on a later call") {
    MethodTable names = main_work_leaf();
    names.add(method(2, "", "", ""));
    names.add(method(5, "", "", ""));
    Cct cct(&names, CctOptions{true, false});
    cct.set_thread_name(1, "main");
    (void)cct.add(trace({compiled(2), interpreted(1, 5)}));
    (void)cct.add(trace({compiled(5), interpreted(1, 9)}));
    names.add(method(2, "app/Main", "work", "()I"));
    REQUIRE(cct.resolve_names());
    CHECK(cct.find({"[main tid=1]", "app/Main.main", "app/Main.work"}).size() == 1);
    CHECK(cct.find({"[main tid=1]", "app/Main.main", "[unknown_method 0x5]"}).size() == 1);
    CHECK(cct.unnamed_methods() == std::vector<uint64_t>{5});
    // The thread's frame is the same one for later traces.
    (void)cct.add(trace({compiled(5), interpreted(1, 9)}));
    CHECK(cct.find({"[main tid=1]"}).size() == 1);
    names.add(method(5, "app/B", "five", "()V"));
    REQUIRE(cct.resolve_names());
    const auto fives = cct.find({"[main tid=1]", "app/Main.main", "app/B.five"});
    REQUIRE(fives.size() == 1);
    CHECK(cct.node(fives[0]).total_samples == 2);
    CHECK(cct.node(fives[0]).call_line == 12);
}

TEST_CASE("a node's children are listed in creation order, again after the tree grew between reads") {
    MethodTable names = main_work_leaf();
    Cct cct(&names);
    auto work5 = cct.add(trace({compiled(2, 0), interpreted(1, 5)}));
    REQUIRE(work5);
    const NodeId main_node = cct.node(*work5).parent;
    REQUIRE(cct.children(main_node).size() == 1);
    CHECK(cct.children(main_node)[0] == *work5);
    CHECK(cct.children(*work5).empty());

    // New children of a node already listed, and a grandchild: the index is rebuilt.
    auto work9 = cct.add(trace({compiled(2, 0), interpreted(1, 9)}));
    auto leaf = cct.add(trace({compiled(3, 0), compiled(2, 3), interpreted(1, 5)}));
    REQUIRE(work9);
    REQUIRE(leaf);
    const std::span<const NodeId> kids = cct.children(main_node);
    REQUIRE(kids.size() == 2);
    CHECK(kids[0] == *work5);
    CHECK(kids[1] == *work9);
    REQUIRE(cct.children(*work5).size() == 1);
    CHECK(cct.children(*work5)[0] == *leaf);
    // Every node but the root is its parent's child exactly once.
    size_t listed = 0;
    for (NodeId id = 0; id < cct.node_count(); ++id) {
        for (NodeId c : cct.children(id)) {
            CHECK(cct.node(c).parent == id);
            ++listed;
        }
    }
    CHECK(listed == cct.node_count() - 1);
}

TEST_CASE("a tree grown past small pages (its arrays on huge pages) keeps every context, count and id") {
    MethodTable names = main_work_leaf();
    Cct cct(&names);
    // main -> work at 300 call sites -> leaf at 200 call sites each: 60,301 nodes, ~3.4 MB of nodes
    // and a 4 MB child table, each array copied to a new mapping as it grew.
    constexpr int kWorkSites = 300, kLeafSites = 200;
    std::vector<NodeId> first_leaf_ids;
    for (int round = 0; round < 2; ++round) {
        for (int w = 0; w < kWorkSites; ++w) {
            for (int l = 0; l < kLeafSites; ++l) {
                const auto id = cct.add(trace({compiled(3, 1), compiled(2, l), compiled(1, w)}));
                REQUIRE(id);
                if (round == 0 && l == 0) first_leaf_ids.push_back(*id);
                if (round == 1 && l == 0) CHECK(*id == first_leaf_ids[static_cast<size_t>(w)]);   // ids never move
            }
        }
    }
    CHECK(cct.node_count() == 1 + 1 + kWorkSites + kWorkSites * kLeafSites);
    CHECK(cct.total_samples() == 2u * kWorkSites * kLeafSites);
    const auto mains = cct.find({"app/Main.main"});
    REQUIRE(mains.size() == 1);
    CHECK(cct.children(mains[0]).size() == kWorkSites);
    const auto leaves = cct.find({"app/Main.main", "app/Main.work", "app/Main.leaf"});
    REQUIRE(leaves.size() == kWorkSites * kLeafSites);
    bool all_two = true;
    for (const NodeId leaf : leaves) all_two = all_two && cct.node(leaf).self_samples == 2 && cct.node(leaf).total_samples == 2;
    CHECK(all_two);

    Cct merged(&names);
    merged.merge(cct);
    merged.merge(cct);
    CHECK(merged.node_count() == cct.node_count());
    CHECK(merged.total_samples() == 2 * cct.total_samples());
    const auto merged_leaves = merged.find({"app/Main.main", "app/Main.work", "app/Main.leaf"});
    REQUIRE(merged_leaves.size() == leaves.size());
    CHECK(merged.node(merged_leaves.back()).self_samples == 4);
}
