// Selective profiling: method patterns (dotted, internal, nested, class-only), judging decoded
// traces, and filtering a finished Cct, which must give the tree that filtering each trace gives.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "profile_test_support.hpp"
#include "stackfrag/profile/export.hpp"
#include "stackfrag/profile/trace_filter.hpp"

using namespace sf;
using namespace sf::profile;
using namespace sf::profile::testing;

namespace {

MethodPattern pattern(std::string_view text) {
    Result<MethodPattern> p = MethodPattern::parse(text);
    INFO(text);
    REQUIRE(p.ok());
    return *p;
}

std::string parse_error(std::string_view text) {
    Result<MethodPattern> p = MethodPattern::parse(text);
    REQUIRE_FALSE(p.ok());
    return p.error().describe();
}

TraceFilter filter(std::vector<std::string> focus, std::vector<std::string> exclude = {}) {
    Result<TraceFilter> f = TraceFilter::parse(focus, exclude);
    REQUIRE(f.ok());
    return std::move(*f);
}

FrameDesc frame(std::string name, FrameType type = FrameType::kCompiled) {
    FrameDesc f;
    f.type = type;
    f.name = std::move(name);
    return f;
}

std::string collapsed(const Cct& cct) {
    std::ostringstream out;
    REQUIRE(write_collapsed(cct, out).ok());
    return out.str();
}

// app/Main.main -> app/Main.run -> {app/Parser.parse -> app/Parser$Lexer.next | app/Io.read}
MethodTable app_methods() {
    MethodTable t;
    t.add(method(1, "app/Main", "main"));
    t.add(method(2, "app/Main", "run"));
    t.add(method(3, "app/Parser", "parse"));
    t.add(method(4, "app/Parser$Lexer", "next"));
    t.add(method(5, "app/Io", "read"));
    t.add(method(6, "app/Parser$Lexer", "<init>"));
    return t;
}

// Ten traces over the methods above, some through a native frame, one incomplete, one failed.
std::vector<CallTrace> app_traces() {
    std::vector<CallTrace> traces;
    for (int i = 0; i < 3; ++i) traces.push_back(trace({inlined(4, 2), compiled(3, 7), compiled(2, 4), interpreted(1, 1)}));
    traces.push_back(trace({compiled(3, 9), compiled(2, 4), interpreted(1, 1)}));
    traces.push_back(trace({native("read"), compiled(5, 1), compiled(2, 8), interpreted(1, 1)}));
    traces.push_back(trace({compiled(5, 3), compiled(2, 8), interpreted(1, 1)}));
    traces.push_back(trace({compiled(6, 0), compiled(3, 2), compiled(2, 4), interpreted(1, 1)}));
    traces.push_back(trace({inlined(4, 2), compiled(3, 7)}, TraceStatus::kIncomplete));
    traces.push_back(trace({compiled(2, 1), interpreted(1, 1)}, TraceStatus::kComplete, 2));
    CallTrace failed;
    failed.status = TraceStatus::kFailed;
    failed.failure = FailReason::kUnknownPc;
    traces.push_back(failed);
    return traces;
}

// The Cct of the traces the filter keeps, judged one by one as the agent and replay do.
Cct add_filtered(const std::vector<CallTrace>& traces, TraceFilter f, const MethodNames& names, FilterCounts& counts) {
    Cct cct(&names);
    for (const CallTrace& t : traces) {
        switch (f.judge(t, &names)) {
            case FilterVerdict::kKeep: (void)cct.add(t, 1000); break;
            case FilterVerdict::kNotInFocus: ++counts.not_in_focus; break;
            case FilterVerdict::kExcluded: ++counts.excluded; break;
        }
    }
    return cct;
}

}  // namespace

TEST_CASE("a method pattern is dotted or internal, a method or a class") {
    const MethodPattern dotted = pattern("app.Parser.parse");
    CHECK(dotted.matches("app/Parser", "parse"));
    CHECK(dotted.matches("app.Parser", "parse"));
    CHECK_FALSE(dotted.matches("app/Parser", "parseAll"));
    CHECK_FALSE(dotted.matches("app/Parse", "parse"));
    CHECK_FALSE(dotted.matches("xapp/Parser", "parse"));
    // The dotted form cannot say whether "parse" is a method or a nested package's class.
    CHECK(dotted.matches("app/Parser/parse", "anything"));

    const MethodPattern internal = pattern("app/Parser.parse");
    CHECK(internal.matches("app/Parser", "parse"));
    CHECK_FALSE(internal.matches("app/Parser/parse", "anything"));

    const MethodPattern klass = pattern("app.Parser");
    CHECK(klass.matches("app/Parser", "parse"));
    CHECK(klass.matches("app/Parser", "<init>"));
    CHECK_FALSE(klass.matches("app/Parser$Lexer", "next"));   // a nested class is a class of its own
    CHECK(pattern("app/Parser").matches("app/Parser", "x"));

    const MethodPattern nested = pattern("app.Parser$Lexer.next");
    CHECK(nested.matches("app/Parser$Lexer", "next"));
    CHECK_FALSE(nested.matches("app/Parser", "next"));
    CHECK(pattern("app.Parser$Lexer").matches("app/Parser$Lexer", "next"));

    CHECK(pattern("app.Parser$Lexer.<init>").matches("app/Parser$Lexer", "<init>"));
    CHECK(pattern("Main").matches("Main", "main"));   // the unnamed package
    CHECK(pattern("Main.main").matches("Main", "main"));
    CHECK(pattern("app.Parser").text() == "app.Parser");
}

TEST_CASE("a bad method pattern is an error saying why") {
    CHECK_THAT(parse_error(""), Catch::Contains("empty"));
    CHECK_THAT(parse_error("app..Parser"), Catch::Contains("'app..Parser'") && Catch::Contains("empty"));
    CHECK_THAT(parse_error(".app.Parser"), Catch::Contains("empty"));
    CHECK_THAT(parse_error("app.Parser."), Catch::Contains("empty"));
    CHECK_THAT(parse_error("app/Parser/"), Catch::Contains("empty"));
    CHECK_THAT(parse_error("app.Parser.parse()"), Catch::Contains("'('"));
    CHECK_THAT(parse_error("app Parser"), Catch::Contains("' '"));
    CHECK_THAT(parse_error("app.Parser;parse"), Catch::Contains("';'"));
    CHECK_THAT(parse_error("app.<init>x"), Catch::Contains("'<'"));
    CHECK_THAT(parse_error("<init>"), Catch::Contains("'<'"));   // a method needs its class
    CHECK_THAT(parse_error("app.Parser.parse_[j]"), Catch::Contains("'['"));
}

TEST_CASE("profile frames match by name, thread and marker frames never") {
    const MethodPattern p = pattern("app.Main.run");
    CHECK(p.matches(frame("app/Main.run")));
    CHECK(p.matches(frame("app/Main.run", FrameType::kInterpreted)));
    CHECK(p.matches(frame("app.Main.run", FrameType::kNative)));   // unannotated, dotted collapsed stacks
    CHECK_FALSE(p.matches(frame("app/Main.runner")));
    CHECK_FALSE(p.matches(frame("app.Main.run", FrameType::kThread)));
    CHECK_FALSE(pattern("memcpy").matches(frame("memcpy", FrameType::kNative)));   // no class: not a method
}

TEST_CASE("a filter parses both lists and names the option of a bad pattern") {
    CHECK(filter({""}, {""}).empty());
    CHECK(filter({"app.Main.run"}, {"app.Io"}).describe() == "focus=app.Main.run exclude=app.Io");
    const std::vector<std::string> good{"app.Main"}, bad{"a..b"};
    Result<TraceFilter> f = TraceFilter::parse(good, bad);
    REQUIRE_FALSE(f.ok());
    CHECK_THAT(f.error().describe(), Catch::StartsWith("exclude: bad method pattern 'a..b'"));
    f = TraceFilter::parse(std::string("a b"), std::string());
    REQUIRE_FALSE(f.ok());
    CHECK_THAT(f.error().describe(), Catch::StartsWith("focus: "));
}

TEST_CASE("focus keeps the samples inside a method's dynamic extent, with their whole stacks") {
    MethodTable names = app_methods();
    FilterCounts counts;
    Cct cct = add_filtered(app_traces(), filter({"app.Parser.parse"}), names, counts);
    // The three full lexer stacks, parse's own sample, <init> under parse, and the incomplete one.
    CHECK(cct.total_samples() == 6);
    // The two Io.read samples, thread 2's run, and the failed walk, judged by its (no) frames.
    CHECK(counts.not_in_focus == 4);
    CHECK(counts.excluded == 0);
    CHECK(cct.trace_counts().failed == 0);
    CHECK(collapsed(cct) ==
          "[truncated];app/Parser.parse_[j];app/Parser$Lexer.next_[i] 1\n"
          "app/Main.main_[0];app/Main.run_[j];app/Parser.parse_[j] 1\n"
          "app/Main.main_[0];app/Main.run_[j];app/Parser.parse_[j];app/Parser$Lexer.<init>_[j] 1\n"
          "app/Main.main_[0];app/Main.run_[j];app/Parser.parse_[j];app/Parser$Lexer.next_[i] 3\n");
}

TEST_CASE("exclude drops the samples inside a method's extent, and wins over focus") {
    MethodTable names = app_methods();
    FilterCounts counts;
    Cct cct = add_filtered(app_traces(), filter({}, {"app/Parser$Lexer"}), names, counts);
    CHECK(cct.total_samples() == 5);   // the failed walk's marker among them
    CHECK(counts.excluded == 5);   // next (4) and <init> (1): the class's every method
    CHECK(cct.find({"app/Main.main", "app/Main.run", "app/Io.read", "read"}).size() == 1);

    FilterCounts both;
    Cct focused = add_filtered(app_traces(), filter({"app.Main"}, {"app.Io.read"}), names, both);
    CHECK(focused.total_samples() == 6);   // the incomplete trace has no app/Main frame left
    CHECK(both.excluded == 2);
    CHECK(both.not_in_focus == 2);   // and neither has the failed one
}

TEST_CASE("focus and exclude of the same pattern partition the samples") {
    MethodTable names = app_methods();
    for (const std::string p : {"app.Main.run", "app.Parser", "app/Io.read", "app.Parser$Lexer.next", "no.Such"}) {
        INFO(p);
        FilterCounts in_counts, out_counts;
        Cct in = add_filtered(app_traces(), filter({p}), names, in_counts);
        Cct out = add_filtered(app_traces(), filter({}, {p}), names, out_counts);
        Cct all(&names);
        for (const CallTrace& t : app_traces()) (void)all.add(t);
        CHECK(in.total_samples() + out.total_samples() == all.total_samples());
        CHECK(in.total_samples() == out_counts.excluded);
        CHECK(out.total_samples() == in_counts.not_in_focus);
        Cct merged = in;
        merged.merge(out);
        CHECK(collapsed(merged) == collapsed(all));
    }
}

TEST_CASE("filtering a finished tree equals filtering each trace before it is added") {
    MethodTable names = app_methods();
    Cct all(&names, CctOptions{.per_thread = true});
    for (const CallTrace& t : app_traces()) (void)all.add(t, 1000);
    all.info().title = "app";
    const std::pair<std::string, std::string> cases[] = {
        {"app.Parser.parse", ""}, {"", "app.Parser$Lexer"}, {"app.Main", "app.Io.read"}, {"app.Io", "read.x"}};
    for (const auto& [focus, exclude] : cases) {
        INFO(focus << " / " << exclude);
        FilterCounts live_counts, tree_counts;
        Cct live(&names, CctOptions{.per_thread = true});
        TraceFilter f = filter({focus}, {exclude});
        for (const CallTrace& t : app_traces()) {
            const FilterVerdict v = f.judge(t, &names);
            if (v == FilterVerdict::kKeep) (void)live.add(t, 1000);
            else (v == FilterVerdict::kExcluded ? live_counts.excluded : live_counts.not_in_focus)++;
        }
        const Cct filtered = filter_cct(all, f, &tree_counts);
        CHECK(collapsed(filtered) == collapsed(live));
        std::ostringstream weights_a, weights_b;
        REQUIRE(write_collapsed(filtered, weights_a, Counter::kWeight).ok());
        REQUIRE(write_collapsed(live, weights_b, Counter::kWeight).ok());
        CHECK(weights_a.str() == weights_b.str());
        CHECK(tree_counts.excluded == live_counts.excluded);
        CHECK(tree_counts.not_in_focus == live_counts.not_in_focus);
        CHECK(filtered.trace_counts().added == live.trace_counts().added);
        CHECK(filtered.trace_counts().incomplete == live.trace_counts().incomplete);
        CHECK(filtered.trace_counts().failed == live.trace_counts().failed);
        CHECK(filtered.trace_counts().failed_by_reason == live.trace_counts().failed_by_reason);
        CHECK(filtered.info().title == "app");
        CHECK(filtered.options().per_thread);
    }
}

TEST_CASE("filtering keeps call sites and lines of the copied nodes") {
    MethodTable names;
    names.add(method(1, "app/Main", "main", "()V", {{0, 10}, {5, 11}, {9, 12}}));
    names.add(method(2, "app/Main", "work", "()I", {{0, 20}}));
    Cct all(&names);
    (void)all.add(trace({compiled(2, 0), interpreted(1, 5)}));
    (void)all.add(trace({compiled(2, 0), interpreted(1, 9)}));
    const Cct kept = filter_cct(all, filter({"app.Main.work"}));
    const auto works = kept.find({"app/Main.main", "app/Main.work"});
    REQUIRE(works.size() == 2);
    CHECK(kept.node(works[0]).call_bci == 5);
    CHECK(kept.node(works[0]).call_line == 11);
    CHECK(kept.node(works[1]).call_bci == 9);
    CHECK(kept.node(works[1]).call_line == 12);
    CHECK(kept.frame_of(works[0]).signature == "()I");
}
