// threads=all and kernel time on a real JVM: AllThreads.java keeps the GC (an allocating thread that
// retains part of what it allocates) and the JIT (varied library code) busy beside a thread that
// writes to /dev/null in a loop. The profile must show [GC Thread] and [C2 CompilerThread] roots with
// named native frames, and, where kernel sampling is permitted (root here), [kernel] leaves under
// AllThreads.syscalls; the agent's reader and decoder counted by their thread clocks, not sampled;
// a recording replays to the same profile. threads=java keeps them out, and a user who may not
// sample the kernel is told so, with the system time's share.
#include <catch2/catch.hpp>

#include <algorithm>

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "agent_process.hpp"
#include "collapsed_stacks.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
const std::string kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";
const std::string kJdk17 = STACKFRAG_JDK17_HOME;
const std::string kJdk25 = STACKFRAG_JDK25_HOME;

using sf::test::parse_collapsed;
using sf::test::Stack;
using sf::test::containing;
using sf::test::total;

struct RootShare {
    uint64_t samples = 0;
    uint64_t named = 0;   // samples with a demangled C++ frame (Class::method) below the root
};

RootShare under_root(const std::vector<Stack>& stacks, const std::string& root) {
    RootShare share;
    for (const Stack& s : stacks) {
        if (s.frames.empty() || s.frames[0] != root) continue;
        share.samples += s.count;
        for (size_t i = 1; i < s.frames.size(); ++i) {
            if (s.frames[i].find("::") != std::string::npos) {
                share.named += s.count;
                break;
            }
        }
    }
    return share;
}

// Samples whose leaf is [kernel] with `method` among the frames below it.
uint64_t kernel_under(const std::vector<Stack>& stacks, const std::string& method) {
    uint64_t sum = 0;
    for (const Stack& s : stacks) {
        if (s.frames.empty() || s.frames.back() != "[kernel]") continue;
        for (const std::string& f : s.frames) {
            if (f.find(method) != std::string::npos) {
                sum += s.count;
                break;
            }
        }
    }
    return sum;
}



std::string compile(const std::string& dir) {
    const auto compiled = sf::test::compile_test_program(kJdk17, "AllThreads.java", dir, {"--release", "17"});
    return compiled.exit_code == 0 ? std::string() : compiled.err;
}

void check_all_threads(const std::string& jdk, const std::string& mode) {
    std::string dir = "/tmp/sf-allthreads-it-XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    REQUIRE(compile(dir).empty());
    const std::string rec = dir + "/run.sfr", live = dir + "/p.collapsed";
    const auto r = sf::test::run_process({jdk + "/bin/java", "-Xmx256m", "-XX:+UseG1GC", "-XX:ParallelGCThreads=2",
                                          "-agentpath:" + kAgent + "=interval=1ms,mode=" + mode + ",record=" + rec +
                                              ",file=" + live + ",loglevel=info",
                                          "-cp", dir, "AllThreads", "3"},
                                         {}, dir + "/jvm", 180);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("[stackfrag] error") == std::string::npos);
    CHECK(r.err.find("is not sampled") == std::string::npos);   // root may sample the kernel

    const std::vector<Stack> stacks = parse_collapsed(sf::test::read_text_file(live));
    const RootShare gc = under_root(stacks, "[GC Thread]");
    const RootShare c2 = under_root(stacks, "[C2 CompilerThread]");
    const uint64_t kernel = kernel_under(stacks, "AllThreads.syscalls");
    const uint64_t writer = containing(stacks, "AllThreads.syscalls");
    INFO("samples " << total(stacks) << "; [GC Thread] " << gc.samples << " (named " << gc.named << "); [C2 CompilerThread] "
                    << c2.samples << " (named " << c2.named << "); AllThreads.syscalls " << writer << ", [kernel] under it "
                    << kernel);
    // Three seconds of 2 GC workers copying survivors and of C2 compiling (counts stay small on a
    // machine loaded by other work: the JVM gets little CPU); nearly all of their stacks name
    // HotSpot's C++ functions.
    CHECK(gc.samples >= 5);
    CHECK(gc.named * 10 >= gc.samples * 9);
    CHECK(c2.samples >= 5);
    CHECK(c2.named * 10 >= c2.samples * 9);
    // The writer makes one write(2) after another: a good part of its time is the kernel's (30-50 %
    // measured; user-only sampling shows none).
    CHECK(kernel >= 10);
    CHECK(kernel * 10 >= writer);
    // System.nanoTime ends in the vDSO, whose ModuleMap carries its bytes: the frames below glibc's
    // __clock_gettime are named from them (__vdso_clock_gettime, [vdso] in its unnamed helpers), not
    // [unknown] (50 of ~6,000 samples of a JDK 17 run were, before).
    uint64_t below_clock_gettime = 0, unknown_below_clock_gettime = 0;
    for (const Stack& s : stacks) {
        const auto at = std::find(s.frames.begin(), s.frames.end(), "__clock_gettime");
        if (at == s.frames.end() || at + 1 == s.frames.end()) continue;
        below_clock_gettime += s.count;
        if (at[1] == "[unknown]") unknown_below_clock_gettime += s.count;
    }
    INFO("samples below __clock_gettime: " << below_clock_gettime);
    CHECK(unknown_below_clock_gettime == 0);
    // Nor does the writer's time in the agent's breadcrumb thunk (between FileOutputStream.write's
    // wrapper and its JNI function) stay unnamed: 11-18 samples a run were [unknown] before, and
    // every frame named nothing at all is at most a few samples of thousands.
    uint64_t unknown = 0;
    for (const Stack& s : stacks) {
        if (std::find(s.frames.begin(), s.frames.end(), "[unknown]") != s.frames.end()) unknown += s.count;
    }
    CHECK(unknown * 1000 <= total(stacks));
    // The agent's own threads are in the profile too, under their names: it shows what they cost.
    // Each of their samples is its top frame alone (and [kernel] over it for a tick in a syscall).
    // The reader and the decoder have no perf event (not even an inherited one: a helper created
    // before the events opened created them); their thread clocks give a sample per period of CPU.
    uint64_t agent_samples = 0, reader_clock = 0, decoder_clock = 0, reader_or_decoder_perf = 0;
    std::string not_by_clock;   // those stacks, to say which when there are any
    const std::string by_clock = "stackfrag_thread_cpu_by_clock";
    for (const Stack& s : stacks) {
        if (s.frames.empty() || s.frames[0].rfind("[stackfrag-", 0) != 0) continue;
        agent_samples += s.count;
        INFO(s.frames.back());
        CHECK(s.frames.size() <= 3);
        if (s.frames.size() == 3) CHECK(s.frames[2] == "[kernel]");
        const bool clock = s.frames.size() == 2 && s.frames[1] == by_clock;
        if (s.frames[0] == "[stackfrag-read]" || s.frames[0] == "[stackfrag-live]") {
            if (!clock) {
                reader_or_decoder_perf += s.count;
                for (const std::string& f : s.frames) not_by_clock += f + ";";
                not_by_clock += " " + std::to_string(s.count) + "\n";
            }
            (s.frames[0] == "[stackfrag-read]" ? reader_clock : decoder_clock) += clock ? s.count : 0;
        }
    }
    CHECK(agent_samples >= 1);
    INFO("the reader's and the decoder's stacks not from their clocks:\n" << not_by_clock);
    CHECK(reader_or_decoder_perf == 0);
    // As many as their CPU time in periods (the log's exact figures), less what they ran after the
    // reader's last look (the stop: the last decodes, the profile's file) and before their first.
    std::smatch cpu;
    REQUIRE(std::regex_search(r.err, cpu, std::regex(R"(agent threads CPU: [0-9.]+ ms \(reader ([0-9.]+), decoder ([0-9.]+))")));
    const double reader_ms = std::stod(cpu[1]), decoder_ms = std::stod(cpu[2]);
    INFO("reader " << reader_ms << " ms, " << reader_clock << " samples by clock; decoder " << decoder_ms << " ms, "
                   << decoder_clock << " samples by clock");
    CHECK(double(reader_clock) <= reader_ms + 1);
    CHECK(double(reader_clock) >= reader_ms * 0.5 - 5);
    CHECK(double(decoder_clock) <= decoder_ms + 1);
    CHECK(double(decoder_clock) >= decoder_ms * 0.5 - 5);
    // Java threads keep their Java roots: no Java frame under a native root.
    for (const Stack& s : stacks) {
        if (s.frames.empty() || (s.frames[0] != "[GC Thread]" && s.frames[0] != "[C2 CompilerThread]")) continue;
        for (const std::string& f : s.frames) CHECK(f.find("AllThreads.") == std::string::npos);
    }

    // The ThreadInfo events of the native threads are in the recording: replay gives the same profile.
    const std::string replayed = dir + "/replay.collapsed";
    const auto replay = sf::test::run_process({kCli, "replay", rec, "--collapsed", replayed}, {}, dir + "/replay", 180);
    INFO(replay.err);
    REQUIRE(replay.exit_code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("(\\d+) \\(live queue full\\)")));
    if (m[1] == "0") {
        CHECK(sf::test::read_text_file(replayed) == sf::test::read_text_file(live));
    } else {
        WARN("the live queue dropped " << m[1] << " samples; live and replay not compared");
    }
    std::filesystem::remove_all(dir);
}

}  // namespace

TEST_CASE("threads=all: GC and C2 threads under their roots with named native frames, kernel time under the "
          "Java method that made the syscall (JDK 17, mode=thread)",
          "[allthreads]") {
    check_all_threads(kJdk17, "thread");
}

TEST_CASE("threads=all in mode=cpu: the per-CPU events' native-thread samples decode under their roots (JDK 25)",
          "[allthreads]") {
    if (!std::filesystem::exists(kJdk25 + "/bin/java")) {
        WARN("no JDK 25 at " << kJdk25);
        return;
    }
    check_all_threads(kJdk25, "cpu");
}

TEST_CASE("threads=java keeps the JVM's own threads out of the profile", "[allthreads]") {
    std::string dir = "/tmp/sf-allthreads-it-XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    REQUIRE(compile(dir).empty());
    const auto r = sf::test::run_process({kJdk17 + "/bin/java", "-XX:ParallelGCThreads=2",
                                          "-agentpath:" + kAgent + "=interval=1ms,threads=java,file=" + dir + "/p.collapsed",
                                          "-cp", dir, "AllThreads", "1"},
                                         {}, dir + "/jvm", 120);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const std::vector<Stack> stacks = parse_collapsed(sf::test::read_text_file(dir + "/p.collapsed"));
    CHECK(total(stacks) > 0);
    for (const Stack& s : stacks) {
        INFO(s.frames.front());
        CHECK(s.frames.front() != "[GC Thread]");
        CHECK(s.frames.front() != "[C2 CompilerThread]");
        CHECK(s.frames.front() != "[VM Thread]");
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("a user who may not sample the kernel is told once, and the summary gives the system time's share",
          "[allthreads]") {
    // Needs root to become another user, and kernel.perf_event_paranoid 2 (or more) to be refused.
    const std::string paranoid = sf::test::read_text_file("/proc/sys/kernel/perf_event_paranoid");
    if (geteuid() != 0 || paranoid.empty() || std::stoi(paranoid) != 2) {
        WARN("not root or perf_event_paranoid is not 2: the refusal cannot be shown here");
        return;
    }
    std::string dir = "/tmp/sf-allthreads-it-XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    std::filesystem::permissions(dir, std::filesystem::perms::all);
    REQUIRE(compile(dir).empty());
    const auto r = sf::test::run_process({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                          kJdk17 + "/bin/java",
                                          // mode=thread: the per-thread rings' share of the locked memory is
                                          // what this test is about (mode=auto would take per-CPU rings here).
                                          "-agentpath:" + kAgent + "=mode=thread,interval=1ms,file=" + dir + "/p.collapsed",
                                          "-cp", dir, "AllThreads", "1"},
                                         {}, dir + "/jvm", 120);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("[stackfrag] error") == std::string::npos);
    const std::string warning = "time in the kernel (syscalls, page faults) is not sampled";
    const size_t first = r.err.find(warning);
    REQUIRE(first != std::string::npos);
    CHECK(r.err.find(warning, first + 1) == std::string::npos);
    CHECK(r.err.find("perf_event_paranoid at 1 or lower") != std::string::npos);
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("kernel time not sampled: system time was ([0-9.]+)% of the process's CPU time")));
    // The writer thread spends much of its second in write(2).
    CHECK(std::stod(m[1]) > 1.0);
    // User-mode sampling goes on as usual; no [kernel] leaf can appear.
    const std::vector<Stack> stacks = parse_collapsed(sf::test::read_text_file(dir + "/p.collapsed"));
    CHECK(total(stacks) > 0);
    CHECK(kernel_under(stacks, "") == 0);
    // The JVM's own threads would take the user's little locked memory (perf_event_mlock_kb) from
    // the Java threads' rings: they are left out, with one line saying so, and the Java threads are
    // all sampled.
    CHECK(r.err.find("the JVM's own threads (GC, compiler, VM) are not sampled: ring memory is limited") != std::string::npos);
    CHECK(r.err.find("cannot sample a thread") == std::string::npos);
    CHECK(under_root(stacks, "[GC Thread]").samples == 0);
    std::filesystem::remove_all(dir);
}
