// A service-like load that no shared workload has (ManyThreads.java): a pool of 120 threads, most
// waking from a short sleep, each task going down a deep chain of lambdas into string, regex,
// stream and reflection work. Every thread's samples decode, complete and like ASGCT; the stop
// summary says how much ring memory the kernel pinned — one ring per thread in mode=thread, one
// per CPU in mode=cpu, where stack=auto gives every thread the largest fragment.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "agent_process.hpp"
#include "collapsed_stacks.hpp"
#include "replay_json.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
constexpr int kThreads = 120;

bool installed(const std::string& jdk) {
    struct stat info {};
    return stat((jdk + "/bin/java").c_str(), &info) == 0;
}

// "ring memory (pinned by the kernel): peak X MB in N rings": N, or -1 without the line.
long peak_rings(const std::string& log) {
    std::smatch m;
    if (!std::regex_search(log, m, std::regex(R"(ring memory \(pinned by the kernel\): peak [0-9.]+ MB in (\d+) rings)"))) {
        return -1;
    }
    return std::stol(m[1]);
}

struct Run {
    std::string dir;
    sf::test::ProcessResult result;
};

// Runs the pool under the agent with `options`, in which "DIR" stands for the run's directory.
Run run_pool(const std::string& jdk, std::string options) {
    Run run{sf::test::temp_dir("many-threads-it"), {}};
    const auto compiled = sf::test::compile_test_program(jdk, "ManyThreads.java", run.dir);
    INFO(compiled.err);
    REQUIRE(compiled.exit_code == 0);
    for (size_t at = options.find("DIR"); at != std::string::npos; at = options.find("DIR")) options.replace(at, 3, run.dir);
    run.result = sf::test::run_process({jdk + "/bin/java", "-agentpath:" + kAgent + "=" + options, "-cp", run.dir,
                                        "ManyThreads", std::to_string(kThreads), "150"},
                                       {}, run.dir + "/jvm", 300);
    return run;
}

// Samples of the collapsed profile whose stack holds `part`.
uint64_t with(const std::vector<sf::test::Stack>& stacks, const std::string& part) {
    uint64_t n = 0;
    for (const auto& s : stacks) {
        for (const auto& f : s.frames) {
            if (f.find(part) != std::string::npos) {
                n += s.count;
                break;
            }
        }
    }
    return n;
}

}  // namespace

TEST_CASE("a 120-thread pool with deep lambda chains decodes completely and like ASGCT, one ring per thread",
          "[manythreads]") {
    const Run run = run_pool(sf::test::kJdk17, "mode=thread,interval=1ms,validate,record=DIR/run.sfr,file=DIR/live.collapsed");
    INFO(run.result.err);
    REQUIRE(run.result.exit_code == 0);
    // One ring per sampled thread: the pool's and the JVM's own.
    CHECK(peak_rings(run.result.err) >= kThreads);

    const nlohmann::json j = sf::test::replay_json(run.dir + "/run.sfr", run.dir);
    INFO(j.dump(1));
    const double samples = j["samples"].get<double>();
    REQUIRE(samples > 1000);
    CHECK(sf::test::failed_samples(j) / samples <= 0.01);
    CHECK(j["incomplete"].get<double>() / samples <= 0.01);
    REQUIRE(j["oracle_both_ok"].get<double>() > 50);
    // 99-100 % in nearly every run; one CI run of 2026-11-28 gave 96.6 % (9 top frames naming another
    // method than ASGCT, of 266 pairs) and its recording was gone. A run below keeps it for
    // `stackfrag replay --show-disagreements`.
    const bool agrees = sf::test::agreement_except_top_bci(j) >= 0.97;
    CHECK(agrees);
    if (!agrees) WARN("recording kept for diagnosis: " << run.dir << "/run.sfr");

    // The pool's work is where the profile says the pool's threads spent their time.
    const auto stacks = sf::test::parse_collapsed(sf::test::read_text_file(run.dir + "/live.collapsed"));
    const uint64_t total = sf::test::total(stacks);
    CHECK(with(stacks, "ManyThreads.work") > total / 5);
    CHECK(with(stacks, "java/util/concurrent/ThreadPoolExecutor.runWorker") > total / 4);
    if (agrees) std::filesystem::remove_all(run.dir);
}

// Samples under each root frame of the collapsed profile.
std::map<std::string, uint64_t> per_root(const std::vector<sf::test::Stack>& stacks) {
    std::map<std::string, uint64_t> out;
    for (const auto& s : stacks) {
        if (!s.frames.empty()) out[s.frames.front()] += s.count;
    }
    return out;
}

TEST_CASE("mode=cpu: the same pool in one ring per CPU, its deep stacks complete with stack=auto; group=pool puts "
          "its threads under one root",
          "[manythreads]") {
    const std::string jdk = installed(sf::test::kJdk25) ? sf::test::kJdk25 : sf::test::kJdk17;
    const Run run = run_pool(jdk, "interval=1ms,mode=cpu,group=pool,record=DIR/run.sfr,file=DIR/live.collapsed");
    INFO(run.result.err);
    REQUIRE(run.result.exit_code == 0);
    CHECK(run.result.err.find("stack=65528") != std::string::npos);   // the loaded options
    const long rings = peak_rings(run.result.err);
    CHECK(rings >= 1);
    CHECK(rings <= 2 * sysconf(_SC_NPROCESSORS_CONF) + 2);   // the per-CPU rings, and the loading thread's own

    std::smatch m;
    REQUIRE(std::regex_search(run.result.err, m,
                              std::regex(R"(stop summary: (\d+) samples taken; decoded [0-9.]+% \((\d+)\), incomplete [0-9.]+% \((\d+)\))")));
    const double samples = std::stod(m[1]);
    REQUIRE(samples > 1000);
    CHECK(std::stod(m[2]) / samples >= 0.99);
    CHECK(std::stod(m[3]) / samples <= 0.01);

    // group=pool: the executor's 120 threads (pool-1-thread-1 ... -120) are one root, which holds
    // the pool's work; the main thread and the JVM's own pools have theirs. `report --group pool`
    // of the recording groups the same way.
    const auto report = sf::test::run_process({STACKFRAG_BINARY_DIR "/bin/stackfrag", "report", run.dir + "/run.sfr",
                                               "--group", "pool", "-o", run.dir + "/report.collapsed"},
                                              {}, run.dir + "/report", 120);
    INFO(report.err);
    REQUIRE(report.exit_code == 0);
    for (const std::string file : {"live.collapsed", "report.collapsed"}) {
        INFO(file);
        const auto stacks = sf::test::parse_collapsed(sf::test::read_text_file(run.dir + "/" + file));
        const std::map<std::string, uint64_t> roots = per_root(stacks);
        for (const auto& [root, n] : roots) UNSCOPED_INFO(root << " " << n);
        const auto pool = roots.find("[pool-1-thread-*]");
        REQUIRE(pool != roots.end());
        CHECK(roots.count("[main]") == 1);
        CHECK(std::none_of(roots.begin(), roots.end(), [](const auto& r) { return r.first.find(" tid=") != std::string::npos; }));
        // ManyThreads.work runs on the pool's threads only.
        std::vector<sf::test::Stack> in_pool;
        for (const auto& st : stacks) {
            if (!st.frames.empty() && st.frames.front() == "[pool-1-thread-*]") in_pool.push_back(st);
        }
        CHECK(with(in_pool, "ManyThreads.work") == with(stacks, "ManyThreads.work"));
        CHECK(with(in_pool, "ManyThreads.work") > pool->second / 5);
    }
    std::filesystem::remove_all(run.dir);
}

TEST_CASE("600 parked threads beside 2 busy ones at 10 kHz: idle threads' rings stay small, nothing is lost",
          "[manythreads]") {
    // Before rings opened small, each of the 600 threads pinned a 2 MB ring (2.5 GB, zeroed by the
    // kernel at every open), and half the busy threads' samples were lost while the reader opened them.
    Run run{sf::test::temp_dir("idle-pool-it"), {}};
    const auto compiled = sf::test::compile_test_program(sf::test::kJdk17, "IdlePool.java", run.dir);
    INFO(compiled.err);
    REQUIRE(compiled.exit_code == 0);
    constexpr int kIdle = 600;
    run.result = sf::test::run_process({sf::test::kJdk17 + "/bin/java",
                                        "-agentpath:" + kAgent + "=mode=thread,interval=100us,file=" + run.dir + "/live.collapsed",
                                        "-cp", run.dir, "IdlePool", std::to_string(kIdle), "2", "400000"},
                                       {}, run.dir + "/jvm", 300);
    INFO(run.result.err);
    REQUIRE(run.result.exit_code == 0);

    std::smatch m;
    REQUIRE(std::regex_search(run.result.err, m,
                              std::regex(R"(ring memory \(pinned by the kernel\): peak ([0-9.]+) MB in (\d+) rings[^;\n]*; (\d+) thread rings opened small, (\d+) grew)")));
    const double peak_mb = std::stod(m[1]);
    CHECK(std::stol(m[2]) >= kIdle);
    CHECK(std::stol(m[3]) >= kIdle);
    // The two busy threads (and a few of the JVM's) grew theirs; a parked thread samples too
    // rarely to fill even a small ring.
    CHECK(std::stol(m[4]) >= 2);
    CHECK(std::stol(m[4]) <= 40);
    // ~68 KB per idle thread and a few full rings; 2 MB each (1.2 GB) before. 191 MB on an idle
    // 2-CPU VM; 463 MB on a loaded one where the reader fell behind and lost 30 % of the samples, as
    // a small ring that a late drain finds at its watermark doubles.
    CHECK(peak_mb < 600);

    REQUIRE(std::regex_search(run.result.err, m, std::regex(R"(summary: (\d+) samples, (\d+) lost)")));
    const double samples = std::stod(m[1]);
    REQUIRE(samples > 5000);
    // Half the busy threads' samples before; what is left is the reader falling behind two busy
    // threads on a 2-CPU VM after it gave up real-time priority (busy more than half of 100 ms with
    // 600 rings): 1.3-1.8 % on some days, 1.7-3.9 % on 2026-11-29 with the agent of 2026-11-28, and
    // 7.2 % in one fresh-clone CI run of 2026-11-29 (12:00 UTC, nothing else running) on the VM whose
    // kernel charges 48 us per sample: 10 kHz on two busy threads is then most of a CPU.
    CHECK(std::stod(m[2]) <= 0.10 * samples);

    const auto stacks = sf::test::parse_collapsed(sf::test::read_text_file(run.dir + "/live.collapsed"));
    CHECK(with(stacks, "IdlePool.work") > sf::test::total(stacks) / 2);
    std::filesystem::remove_all(run.dir);
}

TEST_CASE("a user whose ring memory runs out is told once, and busy threads get the rings of idle ones",
          "[manythreads]") {
    // Needs root to become another user, whose locked memory (kernel.perf_event_mlock_kb, ulimit -l)
    // holds far fewer rings than 300 threads ask for.
    if (geteuid() != 0) {
        WARN("not root: the limit of another user cannot be shown here");
        return;
    }
    std::string dir = "/tmp/sf-ring-limit-it-XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    std::filesystem::permissions(dir, std::filesystem::perms::all);
    const auto compiled = sf::test::compile_test_program(sf::test::kJdk17, "IdlePool.java", dir);
    INFO(compiled.err);
    REQUIRE(compiled.exit_code == 0);
    const auto r = sf::test::run_process({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                          sf::test::kJdk17 + "/bin/java",
                                          "-agentpath:" + kAgent + "=mode=thread,interval=1ms,file=" + dir + "/p.collapsed",
                                          "-cp", dir, "IdlePool", "300", "2", "400000"},
                                         {}, dir + "/jvm", 120);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const std::string warning = "cannot sample a thread";
    const size_t first = r.err.find(warning);
    if (first == std::string::npos) {
        WARN("every thread got a ring: this machine's limits are larger than the test assumes");
        std::filesystem::remove_all(dir);
        return;
    }
    CHECK(r.err.find(warning, first + 1) == std::string::npos);   // once, not once per thread
    CHECK(r.err.find("exceeds what may be locked") != std::string::npos);
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m,
                              std::regex(R"((\d+) threads refused a ring at their start: no more ring memory could be locked.*?; )"
                                         R"((\d+) rings opened later for threads that waited and ran, (\d+) taken from threads)")));
    CHECK(std::stol(m[1]) >= 2);
    // The two busy threads start after the 300 idle ones took the memory: each waits for a window,
    // then gets a parked thread's ring (and more of them as its ring grows).
    CHECK(std::stol(m[2]) >= 2);
    CHECK(std::stol(m[3]) >= 2);
    const auto stacks = sf::test::parse_collapsed(sf::test::read_text_file(dir + "/p.collapsed"));
    CHECK(with(stacks, "IdlePool.work") > sf::test::total(stacks) / 2);
    std::filesystem::remove_all(dir);
}

TEST_CASE("a thread per request: the creating thread's samples in the kernel's clone decode through the VM's thread start",
          "[manythreads]") {
    // Found as a new user would, with a program no shared workload resembles: the thread that starts
    // the others is often sampled right after clone3's syscall, where glibc's unwind info has ended.
    // The walk took stale native-call frames for its callers (2.6-3.1 % of the samples failed, some
    // decoded through them); now it returns to clone3's caller and on through pthread_create.
    const std::string dir = sf::test::temp_dir("thread-churn-it");
    const auto compiled = sf::test::compile_test_program(sf::test::kJdk17, "ThreadChurn.java", dir);
    INFO(compiled.err);
    REQUIRE(compiled.exit_code == 0);
    const auto r = sf::test::run_process({sf::test::kJdk17 + "/bin/java",
                                          "-agentpath:" + kAgent + "=interval=1ms,file=" + dir + "/p.collapsed",
                                          "-cp", dir, "ThreadChurn", "12000", "4"},
                                         {}, dir + "/jvm", 300);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex(R"((\d+) samples taken; .*failed ([0-9.]+)% \((\d+)\))")));
    const double samples = std::stod(m[1]);
    REQUIRE(samples > 300);
    CHECK(std::stod(m[3]) <= 0.01 * samples);
    const auto stacks = sf::test::parse_collapsed(sf::test::read_text_file(dir + "/p.collapsed"));
    // Thread.start0's native wrapper calls JVM_StartThread, whatever is sampled below it.
    uint64_t start0 = 0, through_vm = 0;
    for (const auto& s : stacks) {
        for (size_t i = 0; i + 1 < s.frames.size(); ++i) {   // the last: sampled in the wrapper itself
            if (s.frames[i].rfind("java/lang/Thread.start0", 0) != 0) continue;
            start0 += s.count;
            if (s.frames[i + 1].rfind("JVM_StartThread", 0) == 0) through_vm += s.count;
            break;
        }
    }
    INFO(start0 << " samples below Thread.start0, " << through_vm << " through JVM_StartThread");
    REQUIRE(start0 >= 10);
    CHECK(through_vm >= start0 * 95 / 100);

    // Each request's thread runs ~0.25 ms, less than one period: none can have a sample (a thread's
    // clock counts from zero), and the stop summary says how much CPU time that leaves unexplained.
    REQUIRE(std::regex_search(r.err, m, std::regex(R"(coverage ([0-9.]+)% of the process's CPU time)")));
    const double coverage = std::stod(m[1]);
    REQUIRE(std::regex_search(r.err, m, std::regex(R"(short-lived threads: (\d+) of the (\d+) Java threads that ended ran less )"
                                                   R"(than one period \(1 ms\) in all, [0-9.]+ ms \(([0-9.]+)% of the process)")));
    CHECK(std::stol(m[2]) >= 12000);
    // Most of them: 11,490-11,780 of 12,002 on a quiet machine, 9,925 in one CI run (a thread's own
    // CPU time grows when the machine is busy: cold caches, its stack's first page faults).
    CHECK(std::stol(m[1]) >= std::stol(m[2]) / 2);
    CHECK(coverage + std::stod(m[3]) >= 60.0);
    std::filesystem::remove_all(dir);
}
