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

// The worked example of docs/analyses.md. Self shares, A (10 samples): main;work;leaf 0.6,
// main;work 0.2, main;idle 0.2. B (8 samples): main;work;leaf 0.375, main;work 0.125, main;other 0.5.
const char* const kWorkedA =
    "main;work;leaf 6\n"
    "main;work 2\n"
    "main;idle 2\n";
const char* const kWorkedB =
    "main;work;leaf 3\n"
    "main;work 1\n"
    "main;other 4\n";

}  // namespace

TEST_CASE("a profile compared with itself agrees fully") {
    Cct a = collapsed(kWorkedA);
    ProfileComparison same = compare_profiles(a, a);
    CHECK(same.overlap == Approx(1.0));
    CHECK(same.hot_a_in_b.share() == Approx(1.0));
    CHECK(same.hot_b_in_a.share() == Approx(1.0));
    REQUIRE(same.methods.pearson.has_value());
    CHECK(*same.methods.pearson == Approx(1.0));
    CHECK(*same.methods.spearman == Approx(1.0));
    CHECK(same.contexts_a == 4);   // main, main;work, main;work;leaf, main;idle
    CHECK(same.samples_a == 10);
    CHECK(same.samples_b == 10);
    CHECK(same.top_differences.empty());
    // Shares of 1/3, 1/7, ... do not add up to 1 in floating point; the overlap still is 1 exactly.
    Cct thirds = collapsed("x 1\ny 1\nz 1\nx;y 7\nx;z 11\n");
    CHECK(overlap(thirds, thirds) == 1.0);
}

TEST_CASE("profiles without a common context do not overlap") {
    Cct a = collapsed("p;q 5\n");
    Cct b = collapsed("r;s 7\n");
    ProfileComparison disjoint = compare_profiles(a, b);
    CHECK(disjoint.overlap == 0.0);
    CHECK(disjoint.hot_a_in_b.hot == 1);
    CHECK(disjoint.hot_a_in_b.share() == 0.0);
    CHECK(disjoint.hot_b_in_a.share() == 0.0);
    CHECK(disjoint.hot_a_in_b.present_share() == 0.0);
    // Over the union {p, q, r, s}: A's totals (1, 1, 0, 0) against B's (0, 0, 1, 1).
    CHECK(disjoint.methods.methods == 4);
    CHECK(*disjoint.methods.pearson == Approx(-1.0));
    // The same stack under another name at the root is another context.
    CHECK(overlap(collapsed("x;q 5\n"), collapsed("y;q 5\n")) == 0.0);
}

TEST_CASE("worked example: overlap, hot coverage both ways, method correlation") {
    Cct a = collapsed(kWorkedA);
    Cct b = collapsed(kWorkedB);
    // min(0.6, 0.375) + min(0.2, 0.125); main;idle and main;other are in one profile only.
    CHECK(overlap(a, b) == Approx(0.5));
    CHECK(overlap(b, a) == Approx(0.5));

    // threshold 0.5: A's hot contexts have self >= 3 of its max 6: {leaf}; B's >= 2 of 4: {leaf, other}.
    HotCoverage a_in_b = hot_coverage(a, b, 0.5);
    CHECK(a_in_b.hot == 1);
    CHECK(a_in_b.hot_in_other == 1);
    CHECK(a_in_b.share() == Approx(1.0));
    HotCoverage b_in_a = hot_coverage(b, a, 0.5);
    CHECK(b_in_a.hot == 2);
    CHECK(b_in_a.hot_in_other == 1);
    CHECK(b_in_a.share() == Approx(0.5));
    CHECK(b_in_a.present_share() == Approx(0.5));

    // threshold 0.3: A's hot are self >= 1.8: {leaf, work, idle}; B's >= 1.2: {leaf, other}. Of A's,
    // only leaf is hot in B, but main;work is on B's stacks too (present) while main;idle is not.
    HotCoverage low = hot_coverage(a, b, 0.3);
    CHECK(low.hot == 3);
    CHECK(low.hot_in_other == 1);
    CHECK(low.present_in_other == 2);
    CHECK(low.share() == Approx(1.0 / 3.0));

    // Method total shares over {main, work, leaf, idle, other}: A (1, .8, .6, .2, 0), B (1, .5, .375,
    // 0, .5). Deviations from the means .52 and .475 give cov .39, var .688 and .5125:
    // r = .39 / sqrt(.688 * .5125). Ranks A (5, 4, 3, 2, 1), B (5, 3.5, 2, 1, 3.5) with tied .5s:
    // cov 5.5, var 10 and 9.5.
    Correlation correlation = method_correlation(a, b);
    CHECK(correlation.methods == 5);
    CHECK(*correlation.pearson == Approx(0.39 / std::sqrt(0.688 * 0.5125)));
    CHECK(*correlation.spearman == Approx(5.5 / std::sqrt(10.0 * 9.5)));

    ComparisonOptions options;
    options.hot_threshold = 0.5;
    options.top_differences = 2;
    ProfileComparison all = compare_profiles(a, b, options);
    CHECK(all.overlap == Approx(0.5));
    CHECK(all.hot_a_in_b.share() == Approx(1.0));
    CHECK(all.hot_b_in_a.share() == Approx(0.5));
    CHECK(all.contexts_a == 4);
    CHECK(all.contexts_b == 4);
    CHECK(all.samples_b == 8);
    // |0.5 - 0| for main;other, then |0.6 - 0.375| for the leaf.
    REQUIRE(all.top_differences.size() == 2);
    CHECK(all.top_differences[0].path == std::vector<std::string>{"main", "other"});
    CHECK(all.top_differences[0].weight_a == 0.0);
    CHECK(all.top_differences[0].weight_b == Approx(0.5));
    CHECK(all.top_differences[1].path == std::vector<std::string>{"main", "work", "leaf"});
    CHECK(all.top_differences[1].weight_a == Approx(0.6));
    CHECK(all.top_differences[1].weight_b == Approx(0.375));
}

TEST_CASE("compiled, interpreted and inlined runs of a method are one context unless kinds are kept") {
    Cct interpreted_run = collapsed("app/Main.main_[0];app/Main.work_[0] 4\n");
    Cct compiled_run = collapsed("app/Main.main_[j];app/Main.work_[i] 4\n");
    // async-profiler without annotations: Java frames have no suffix and read back as native.
    Cct unannotated = collapsed("app/Main.main;app/Main.work 4\n");
    CHECK(overlap(interpreted_run, compiled_run) == Approx(1.0));
    CHECK(overlap(compiled_run, unannotated) == Approx(1.0));
    CHECK(context_frame_name(compiled_run.frame(1), {}) == "app/Main.main");

    ContextOptions kinds_kept;
    kinds_kept.merge_frame_kinds = false;
    CHECK(overlap(interpreted_run, compiled_run, kinds_kept) == 0.0);
    CHECK(overlap(interpreted_run, interpreted_run, kinds_kept) == Approx(1.0));

    // Kernel frames, async-profiler's "_[k]", are one "[kernel]" frame (the test after the next).
    CHECK(overlap(collapsed("main;write;ksys_write_[k] 2\n"), collapsed("main;write;[kernel] 2\n")) == Approx(1.0));
}

TEST_CASE("thread frames are ignored unless asked for") {
    Cct per_thread = collapsed(
        "[main tid=1];main;work 3\n"
        "[worker tid=2];main;work 1\n"
        "[worker tid=2];main;idle 4\n");
    Cct merged = collapsed("main;work 4\nmain;idle 4\n");
    CHECK(overlap(per_thread, merged) == Approx(1.0));
    CHECK(compare_profiles(per_thread, merged).contexts_a == 3);

    ContextOptions keep_threads;
    keep_threads.ignore_threads = false;
    CHECK(overlap(per_thread, merged, keep_threads) == 0.0);
    CHECK(overlap(per_thread, per_thread, keep_threads) == Approx(1.0));
    // Only the thread differs: main;work is 3/8 in [main] and 1/8 in [worker], so with threads the
    // worker's work is a context of its own.
    Cct other_split = collapsed("[main tid=1];main;work 1\n[worker tid=2];main;work 3\n[worker tid=2];main;idle 4\n");
    CHECK(overlap(per_thread, other_split) == Approx(1.0));
    CHECK(overlap(per_thread, other_split, keep_threads) == Approx(1.0 / 8 + 1.0 / 8 + 4.0 / 8));
}

TEST_CASE("call sites and signatures do not split a context") {
    MethodTable names;
    names.add(method(1, "app/Main", "main", "([Ljava/lang/String;)V"));
    names.add(method(2, "app/Main", "work", "()I"));
    Cct with_call_sites(&names);
    (void)with_call_sites.add(trace({compiled(2, 3), interpreted(1, 5)}));
    (void)with_call_sites.add(trace({compiled(2, 3), interpreted(1, 5)}));
    (void)with_call_sites.add(trace({inlined(2, 0), interpreted(1, 9)}));
    REQUIRE(with_call_sites.node_count() == 4);   // work under two call sites of main

    Cct collapsed_view = collapsed("app/Main.main_[0];app/Main.work_[j] 3\n");
    CHECK(overlap(with_call_sites, collapsed_view) == Approx(1.0));
    Cct normal = normalize_contexts(with_call_sites);
    CHECK(normal.node_count() == 3);
    CHECK(normal.total_samples() == 3);
    CHECK(normal.find({"app/Main.main", "app/Main.work"}).size() == 1);
}

TEST_CASE("weights can replace sample counts") {
    MethodTable names;
    names.add(method(1, "app/Main", "main"));
    names.add(method(2, "app/Main", "fast"));
    names.add(method(3, "app/Main", "slow"));
    Cct a(&names);
    (void)a.add(trace({compiled(2), compiled(1)}), 100);
    (void)a.add(trace({compiled(3), compiled(1)}), 300);
    Cct b(&names);
    (void)b.add(trace({compiled(2), compiled(1)}), 300);
    (void)b.add(trace({compiled(3), compiled(1)}), 100);
    // One sample each: the counts agree, the weights (1/4, 3/4) against (3/4, 1/4) overlap by 1/2.
    CHECK(overlap(a, b) == Approx(1.0));
    CHECK(overlap(a, b, {}, Counter::kWeight) == Approx(0.5));
    ComparisonOptions by_weight;
    by_weight.counter = Counter::kWeight;
    CHECK(compare_profiles(a, b, by_weight).samples_a == 400);
}

TEST_CASE("empty profiles and short inputs have no defined coverage or correlation") {
    Cct empty;
    Cct a = collapsed(kWorkedA);
    CHECK(overlap(empty, a) == 0.0);
    CHECK(overlap(empty, empty) == 0.0);
    HotCoverage none = hot_coverage(empty, a, 0.1);
    CHECK(none.hot == 0);
    CHECK_FALSE(none.share().has_value());
    CHECK_FALSE(method_correlation(empty, empty).pearson.has_value());

    const std::vector<double> one{1.0};
    CHECK_FALSE(pearson_correlation(one, one).has_value());
    const std::vector<double> flat{2.0, 2.0, 2.0};
    const std::vector<double> rising{1.0, 2.0, 3.0};
    CHECK_FALSE(pearson_correlation(flat, rising).has_value());
    const std::vector<double> squares{1.0, 4.0, 9.0};
    CHECK(*spearman_correlation(rising, squares) == Approx(1.0));   // monotone, not linear
    CHECK(*pearson_correlation(rising, squares) < 1.0);
}

TEST_CASE("hidden classes of two runs are one context: their addresses are dropped") {
    // JDK 17 lambdas carry a number and an address, JDK 25 ones only the address; both vary by run.
    Cct run1 = collapsed("java/lang/Thread.run;app/Main$$Lambda$16.0x00007f03f00b7d78.run;app/Main.work 3\n"
                         "app/Main.main;java/lang/invoke/LambdaForm$MH.0x0000000801001000.invoke 1\n");
    Cct run2 = collapsed("java/lang/Thread.run;app/Main$$Lambda$16.0x00007febec0b7d78.run_[j];app/Main.work 3\n"
                         "app/Main.main;java/lang/invoke/LambdaForm$MH.0x0000000801002c00.invoke 1\n");
    CHECK(overlap(run1, run2) == Approx(1.0));
    CHECK(overlap(run1, run2, ContextOptions{.merge_frame_kinds = false}) == Approx(0.25));
    // A name with ".0x" that is no address stays as it is.
    CHECK(overlap(collapsed("a.0xyz 1\n"), collapsed("a 1\n")) == 0.0);
}

TEST_CASE("a native frame matches async-profiler's name for it: the C++ parameter list is dropped") {
    // stackfrag names C++ frames with their parameters, async-profiler without (its collapsed output).
    Cct ours = collapsed("start_thread;thread_native_entry(Thread*);PhaseChaitin::Split(unsigned int, ResourceArea*) 4\n"
                         "start_thread;(anonymous namespace)::run(int);Klass::name() const 2\n"
                         "start_thread;{lambda(int)#1}::operator()(int) const 1\n");
    Cct theirs = collapsed("start_thread;thread_native_entry;PhaseChaitin::Split 4\n"
                           "start_thread;(anonymous namespace)::run;Klass::name 2\n"
                           "start_thread;{lambda(int)#1}::operator() 1\n");
    CHECK(overlap(ours, theirs) == Approx(1.0));
    ProfileComparison c = compare_profiles(ours, theirs);
    CHECK(c.hot_a_in_b.share() == Approx(1.0));
    REQUIRE(c.methods.pearson.has_value());
    CHECK(*c.methods.pearson == Approx(1.0));
    // async-profiler's names are cut already: cutting them again must not take a call operator's "()".
    CHECK(overlap(collapsed("main;S::operator()() 1\n"), collapsed("main;S::operator() 1\n")) == Approx(1.0));
    // Overloads of one function become one context, as Java overloads do.
    CHECK(overlap(collapsed("main;f(int) 1\nmain;f(long) 1\n"), collapsed("main;f 2\n")) == Approx(1.0));
    // Thread frames and names that are parentheses alone are not parameter lists.
    const ContextOptions keep_threads{.ignore_threads = false};
    CHECK(overlap(collapsed("[pool (2) tid=7];f(int) 1\n"), collapsed("[pool (2) tid=7];f 1\n"), keep_threads) ==
          Approx(1.0));
    CHECK(overlap(collapsed("[pool (2) tid=7];f 1\n"), collapsed("[pool  tid=7];f 1\n"), keep_threads) == 0.0);
    CHECK(overlap(collapsed("main;(x) 1\n"), collapsed("main;x 1\n")) == 0.0);
}

TEST_CASE("a run of async-profiler's kernel frames is one [kernel] frame, as stackfrag marks a kernel-mode sample") {
    Cct ours = collapsed("main;read;[kernel] 3\nmain;work 1\n");
    Cct theirs = collapsed("main;read;entry_SYSCALL_64_[k];do_syscall_64_[k];ksys_read_[k] 2\n"
                           "main;read;entry_SYSCALL_64_[k];do_syscall_64_[k] 1\nmain;work 1\n");
    CHECK(overlap(ours, theirs) == Approx(1.0));
    // Kernel frames between user frames (a signal delivered on the way out) are one frame too.
    CHECK(overlap(collapsed("a;x_[k];y_[k];b 1\n"), collapsed("a;[kernel];b 1\n")) == Approx(1.0));
    // With frame kinds kept, kernel frames stay as they are.
    CHECK(overlap(ours, theirs, ContextOptions{.merge_frame_kinds = false}) == Approx(0.25));
}
