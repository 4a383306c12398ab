// Breadcrumbs on a real JVM. A JNI library built here (tests/integration/breadcrumbs/bc_natives.c,
// no unwind tables, rbp used as a loop counter) has natives with many arguments, several passed on
// the stack, that spin in native code; the Java driver checks every result. Runs with
// breadcrumbs=on and =off, then decodes both recordings with `stackfrag replay --json` and compares
// how many native-top samples decode. The same comparison on a shared workload (few natives) shows
// that breadcrumbs=on changes nothing there. Figures are printed (WARN) for docs/decoding.md.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent_process.hpp"
#include "collapsed_stacks.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
const std::string kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";
const std::string kSources = STACKFRAG_SOURCE_DIR "/tests/integration/breadcrumbs";
const std::string kWorkloads = STACKFRAG_SHARED_DIR "/bench/workloads";
using sf::test::kJdk17;
using sf::test::kJdk25;

// Native-top samples: replay counts a trace's first frame kind whether or not it decoded, and a
// walk that fails in native code fails with native_unwind_failed or unknown_pc (after the native
// frame was pushed), so decoded native-top samples = native tops - those failures.
struct NativeTops {
    uint64_t samples = 0, decoded_all = 0;
    uint64_t decoded = 0, failed = 0, breadcrumbs_used = 0, rescans = 0;
    // Samples in the natives' own code (every frame above the last Java frame is a function of
    // bc_natives.c, or '[unknown]' while its library is not announced yet), and of those the ones
    // whose last Java frame is the native method itself: decoded to the right Java caller. Samples
    // elsewhere in native code (libjvm, libc, a sanitizer's runtime) are in neither.
    uint64_t in_natives_code = 0, in_driver_natives = 0;
    double pct() const { return decoded + failed ? 100.0 * double(decoded) / double(decoded + failed) : 0; }
};

NativeTops replay(const std::string& recording, const std::string& tag) {
    const std::string collapsed = tag + ".collapsed";
    const sf::test::ProcessResult run =
        sf::test::run_process({kCli, "replay", "--json", "--collapsed", collapsed, recording}, {}, tag, 300);
    INFO("replay stderr: " << run.err.substr(0, 2000));
    REQUIRE(run.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(run.out);
    NativeTops t;
    t.samples = j.value("perf_samples", uint64_t{0});
    t.decoded_all = j.value("decoded", uint64_t{0});
    const uint64_t native_tops = j.contains("top_frame_kinds") ? j["top_frame_kinds"].value("native", uint64_t{0}) : 0;
    for (const char* reason : {"native_unwind_failed", "unknown_pc"}) t.failed += j["failed"].value(reason, uint64_t{0});
    t.failed = std::min(t.failed, native_tops);
    t.decoded = native_tops - t.failed;
    t.breadcrumbs_used = j["stats"].value("breadcrumbs_used", uint64_t{0});
    t.rescans = j["stats"].value("native_rescans", uint64_t{0});
    static const std::regex java_frame(R"(_\[[^\]]*\]$)");
    static const std::regex driver_native(R"(^BcNatives\.(mix|many|fsum|registered)_\[[^\]]*\]$)");
    static const std::set<std::string> natives_code = {"[unknown]", "spin", "registered", "Java_BcNatives_mix",
                                                       "Java_BcNatives_many", "Java_BcNatives_fsum"};
    for (const sf::test::Stack& stack : sf::test::parse_collapsed(sf::test::read_text_file(collapsed))) {
        const std::vector<std::string>& frames = stack.frames;
        size_t native_from = 0;   // just past the last Java frame
        for (size_t i = 0; i < frames.size(); ++i) {
            if (std::regex_search(frames[i], java_frame)) native_from = i + 1;
        }
        if (native_from == 0 || native_from == frames.size()) continue;
        if (!std::all_of(frames.begin() + static_cast<std::ptrdiff_t>(native_from), frames.end(),
                         [](const std::string& f) { return natives_code.count(f) != 0; })) {
            continue;
        }
        t.in_natives_code += stack.count;
        if (std::regex_match(frames[native_from - 1], driver_native)) t.in_driver_natives += stack.count;
    }
    return t;
}

std::string figures(const char* what, const NativeTops& t) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s: %llu samples, %llu decoded; native-top %llu decoded / %llu failed (%.1f%%); in the "
                  "natives' code %llu, of which %llu under their native method; breadcrumbs used %llu, native "
                  "rescans %llu",
                  what, static_cast<unsigned long long>(t.samples), static_cast<unsigned long long>(t.decoded_all),
                  static_cast<unsigned long long>(t.decoded), static_cast<unsigned long long>(t.failed), t.pct(),
                  static_cast<unsigned long long>(t.in_natives_code), static_cast<unsigned long long>(t.in_driver_natives),
                  static_cast<unsigned long long>(t.breadcrumbs_used), static_cast<unsigned long long>(t.rescans));
    return line;
}

struct Built {
    std::string dir, library;
};

Built build_natives(const std::string& jdk, const std::string& tag) {
    Built b{tag + "-classes", tag + "-classes/libbcnatives.so"};
    (void)sf::test::run_process({"/bin/mkdir", "-p", b.dir}, {}, tag + "-mkdir", 30);
    const sf::test::ProcessResult cc = sf::test::run_process(
        {"/usr/bin/gcc", "-shared", "-fPIC", "-O2", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables",
         "-fno-unwind-tables", "-mno-red-zone", "-ffp-contract=off", "-I" + jdk + "/include",
         "-I" + jdk + "/include/linux", kSources + "/bc_natives.c", "-o", b.library},
        {}, tag + "-gcc", 120);
    INFO("gcc: " << cc.err.substr(0, 2000));
    REQUIRE(cc.exit_code == 0);
    const sf::test::ProcessResult javac = sf::test::run_process(
        {kJdk17 + "/bin/javac", "-d", b.dir, kSources + "/BcNatives.java"}, {}, tag + "-javac", 120);
    INFO("javac: " << javac.err.substr(0, 2000));
    REQUIRE(javac.exit_code == 0);
    return b;
}

NativeTops run_driver(const std::string& jdk, const Built& b, const std::string& tag, bool breadcrumbs,
                      const std::string& extra_jvm_flag) {
    const std::string name = tag + (breadcrumbs ? "-on" : "-off");
    const std::string recording = name + ".sfr", log = name + ".log";
    std::remove(recording.c_str());
    std::remove(log.c_str());
    const std::string options = std::string("interval=1ms,breadcrumbs=") + (breadcrumbs ? "on" : "off") +
                                ",record=" + recording + ",log=" + log + ",loglevel=debug";
    std::vector<std::string> argv = {jdk + "/bin/java", "-agentpath:" + kAgent + "=" + options};
    if (!extra_jvm_flag.empty()) argv.push_back(extra_jvm_flag);
    for (const char* a : {"-cp", "", "BcNatives", "", "4"}) argv.push_back(a);
    argv[argv.size() - 4] = b.dir;
    argv[argv.size() - 2] = b.library;
    const sf::test::ProcessResult run = sf::test::run_process(argv, {}, name, 300);
    const std::string log_text = sf::test::read_text_file(log);
    INFO(name << "\nstdout: " << run.out.substr(0, 2000) << "\nstderr: " << run.err.substr(0, 2000));
    REQUIRE(run.started);
    REQUIRE_FALSE(run.timed_out);
    REQUIRE(run.exit_code == 0);   // every native returned what Java computed
    CHECK(run.out.find("mismatches 0") != std::string::npos);
    CHECK(log_text.find("[stackfrag] error") == std::string::npos);
    if (breadcrumbs) {
        for (const char* method : {"LBcNatives;.mix(", "LBcNatives;.many(", "LBcNatives;.fsum(", "LBcNatives;.registered("}) {
            INFO(method);
            CHECK(log_text.find(std::string("breadcrumbs: ") + method) != std::string::npos);
        }
        CHECK(log_text.find("native bindings through") != std::string::npos);
    } else {
        CHECK(log_text.find("bound through thunk") == std::string::npos);
    }
    return replay(recording, name + "-replay");
}

void compare_driver(const std::string& jdk, const std::string& extra_jvm_flag) {
    if (!sf::test::exists(jdk + "/bin/java")) {
        WARN(jdk << " is not installed: skipped");
        return;
    }
    const sf::test::ScratchDir scratch(std::string("bc-it") + (jdk == kJdk25 ? "-25" : "-17") +
                                       (extra_jvm_flag.empty() ? "" : "-int"));
    const std::string tag = scratch.file("bc");
    const Built b = build_natives(jdk, tag);
    const NativeTops on = run_driver(jdk, b, tag, true, extra_jvm_flag);
    const NativeTops off = run_driver(jdk, b, tag, false, extra_jvm_flag);
    WARN("BcNatives on " << jdk << " " << extra_jvm_flag << "\n  " << figures("breadcrumbs=on ", on) << "\n  "
                         << figures("breadcrumbs=off", off));
    // The driver spends most of its time in the natives' spin loops.
    REQUIRE(on.decoded + on.failed > 100);
    REQUIRE(off.decoded + off.failed > 100);
    CHECK(on.breadcrumbs_used > 0);
    CHECK(off.breadcrumbs_used == 0);
    CHECK(on.pct() >= 85.0);
    CHECK(on.pct() + 1.0 >= off.pct());
    // Decoded and right: the native method's frame and its Java caller (a rescan without breadcrumbs
    // may take a stale return address and attribute the sample to another method: 26-97 % right
    // with breadcrumbs off, 99.9-100 % with them on). Counted over the samples in the natives'
    // code, not over all native-top ones: under TSan its runtime's own work (symbolizing stacks for
    // its suppressions) took a quarter of the driver's samples in one run.
    REQUIRE(on.in_natives_code > 100);
#if defined(__SANITIZE_THREAD__)
    // Under TSan the VM's ServiceThread, which posts CompiledMethodLoad, runs instrumented: the
    // natives' wrappers were announced 300+ ms after they began to run (seen: samples from 1.0 to
    // 1.3 s into the run, the first wrapper frame decoded at 1.7 s). A breadcrumb into a wrapper
    // not announced yet cannot name the native method, so those samples go to its caller (8 %
    // in one run); their second decode may still come too early. Printed, not checked.
    if (on.in_driver_natives * 100 < on.in_natives_code * 95) {
        WARN("TSan: " << on.in_driver_natives << " of " << on.in_natives_code
                      << " samples in the natives' code under their native method (not checked)");
    }
#else
    CHECK(on.in_driver_natives * 100 >= on.in_natives_code * 95);
#endif
}

}  // namespace

TEST_CASE("breadcrumbs: JNI natives with stack arguments, results and native-top decoding (JDK 17)", "[integration]") {
    compare_driver(kJdk17, "");
}

TEST_CASE("breadcrumbs: natives called from the interpreter (JDK 17, -Xint)", "[integration]") {
    compare_driver(kJdk17, "-Xint");
}

TEST_CASE("breadcrumbs: JNI natives with stack arguments, results and native-top decoding (JDK 25)", "[integration]") {
    compare_driver(kJdk25, "");
}

TEST_CASE("breadcrumbs: a shared workload runs unchanged with breadcrumbs on", "[integration]") {
    const std::string run_sh = kWorkloads + "/groundtruth/run.sh";
    if (!sf::test::exists(run_sh)) {
        WARN(run_sh << " is not there: skipped");
        return;
    }
    const sf::test::ScratchDir scratch("bc-it-gt");
    const std::string tag = scratch.file("gt");
    std::map<bool, NativeTops> results;
    for (bool on : {true, false}) {
        const std::string name = tag + (on ? "-on" : "-off");
        const std::string recording = name + ".sfr", log = name + ".log";
        std::remove(recording.c_str());
        std::remove(log.c_str());
        std::map<std::string, std::string> env = {{"ITER", "3"}, {"GT_SLICE_MS", "300"}, {"THREADS", "2"},
                                                  {"JAVA_HOME", kJdk17}};
        env["JAVA_OPTS"] = "-agentpath:" + kAgent + "=interval=1ms,breadcrumbs=" + (on ? "on" : "off") +
                           ",record=" + recording + ",log=" + log;
        const sf::test::ProcessResult run = sf::test::run_process({"/bin/bash", run_sh}, env, name, 600);
        INFO(name << " stderr: " << run.err.substr(0, 3000));
        REQUIRE(run.exit_code == 0);
        const std::string log_text = sf::test::read_text_file(log);
        CHECK(log_text.find("[stackfrag] error") == std::string::npos);
        results[on] = replay(recording, name + "-replay");
    }
    WARN("groundtruth (JDK 17)\n  " << figures("breadcrumbs=on ", results[true]) << "\n  "
                                    << figures("breadcrumbs=off", results[false]));
    CHECK(results[true].decoded_all > 0);
}
