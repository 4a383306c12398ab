// Interval parsing, config validation, and the errors the kernel's refusals turn into.
#include <catch2/catch.hpp>

#include <linux/perf_event.h>
#include <grp.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "stackfrag/kernel/perf_events.hpp"
#include "test_env.hpp"

using sf::Errc;
using sf::kernel::SamplingConfig;

namespace {

using sf::test::contains;

// Runs `body` in a forked child (for privilege drops and limits that must not leak into this
// process); it returns "" on success or what went wrong, which comes back through a pipe.
std::string in_child(const std::function<std::string()>& body) {
    int fds[2];
    if (pipe(fds) != 0) return "pipe failed";
    const pid_t child = fork();
    if (child == 0) {
        close(fds[0]);
        const std::string verdict = body();
        const std::string message = verdict.empty() ? "ok" : verdict;
        [[maybe_unused]] ssize_t n = write(fds[1], message.data(), message.size());
        _exit(0);
    }
    close(fds[1]);
    std::string message;
    char buffer[512];
    ssize_t got;
    while ((got = read(fds[0], buffer, sizeof buffer)) > 0) message.append(buffer, static_cast<size_t>(got));
    close(fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    return message == "ok" ? "" : (message.empty() ? "child died" : message);
}

std::string drop_to_nobody() {
    if (getuid() != 0) return "";
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) return "cannot become nobody";
    return "";
}

}  // namespace

TEST_CASE("parse_interval reads a number with an optional unit") {
    CHECK(*sf::kernel::parse_interval("100us") == 100'000);
    CHECK(*sf::kernel::parse_interval("1ms") == 1'000'000);
    CHECK(*sf::kernel::parse_interval("10ms") == 10'000'000);
    CHECK(*sf::kernel::parse_interval("2s") == 2'000'000'000);
    CHECK(*sf::kernel::parse_interval("500ns") == 500);
    CHECK(*sf::kernel::parse_interval("250000") == 250'000);
    CHECK(*sf::kernel::parse_interval("0") == 0);

    for (const char* bad : {"", "ms", "1 ms", "1.5ms", "1h", "-1ms", "99999999999999999999", "20000000000s"}) {
        INFO("'" << bad << "'");
        auto parsed = sf::kernel::parse_interval(bad);
        REQUIRE_FALSE(parsed.ok());
        CHECK(parsed.error().code == Errc::kInvalidArgument);
        std::string quoted = "'";
        quoted += bad;
        quoted += "'";
        CHECK(contains(parsed.error().message, quoted));
        CHECK(contains(parsed.error().hint, "1ms"));
    }
}

TEST_CASE("validate names the field that is wrong") {
    CHECK(sf::kernel::validate(SamplingConfig{}).ok());
    struct Case {
        const char* field;
        std::function<void(SamplingConfig&)> spoil;
    };
    const Case cases[] = {
        {"period_ns", [](SamplingConfig& c) { c.period_ns = 0; }},
        {"period_ns", [](SamplingConfig& c) { c.period_ns = 9'999; }},
        {"stack_bytes", [](SamplingConfig& c) { c.stack_bytes = 0; }},
        {"stack_bytes", [](SamplingConfig& c) { c.stack_bytes = 1001; }},
        {"stack_bytes", [](SamplingConfig& c) { c.stack_bytes = 65536; }},
        {"ring_pages", [](SamplingConfig& c) { c.ring_pages = 0; }},
        {"ring_pages", [](SamplingConfig& c) { c.ring_pages = 96; }},
        {"ring_pages", [](SamplingConfig& c) { c.ring_pages = 4; }},   // smaller than two samples
        {"wakeup_bytes", [](SamplingConfig& c) { c.wakeup_bytes = c.ring_pages * 4096 * 2; }},
    };
    for (const Case& c : cases) {
        SamplingConfig config;
        c.spoil(config);
        const sf::Status status = sf::kernel::validate(config);
        INFO(c.field);
        REQUIRE_FALSE(status.ok());
        CHECK(status.error().code == Errc::kInvalidArgument);
        CHECK(contains(status.error().message, c.field));
        CHECK_FALSE(status.error().hint.empty());
        // Opening refuses the same config before asking the kernel.
        auto opened = sf::kernel::PerfEvent::open_thread(getpid(), config);
        REQUIRE_FALSE(opened.ok());
        CHECK(contains(opened.error().message, c.field));
    }
    SamplingConfig largest;
    largest.stack_bytes = 65528;
    largest.ring_pages = 64;
    CHECK(sf::kernel::validate(largest).ok());
}

TEST_CASE("make_attr asks for what the decoder needs") {
    SamplingConfig config;
    config.clock = sf::kernel::ClockKind::kCpu;
    config.period_ns = 250'000;
    const perf_event_attr attr = sf::kernel::make_attr(config, false);
    CHECK(attr.type == PERF_TYPE_SOFTWARE);
    CHECK(attr.config == PERF_COUNT_SW_CPU_CLOCK);
    CHECK(attr.sample_period == 250'000);
    CHECK(attr.sample_stack_user == 16384);
    CHECK(__builtin_popcountll(attr.sample_regs_user) == 7);
    CHECK(attr.exclude_kernel == 1);
    CHECK(attr.disabled == 1);
    CHECK(attr.use_clockid == 1);
    CHECK(attr.clockid == CLOCK_MONOTONIC);
    CHECK(attr.inherit == 0);
    CHECK(attr.wakeup_watermark == config.ring_pages * static_cast<uint32_t>(sysconf(_SC_PAGESIZE)) / 2);
    CHECK(sf::kernel::make_attr(config, true).inherit == 1);
    CHECK(sf::kernel::make_attr(SamplingConfig{}, false).config == PERF_COUNT_SW_TASK_CLOCK);
}

TEST_CASE("running out of file descriptors says to raise RLIMIT_NOFILE") {
    rlimit saved{};
    REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
    rlimit none = saved;
    none.rlim_cur = 0;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &none) == 0);
    auto opened = sf::kernel::PerfEvent::open_thread(static_cast<pid_t>(syscall(SYS_gettid)), SamplingConfig{});
    REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
    REQUIRE_FALSE(opened.ok());
    CHECK(opened.error().code == Errc::kResourceLimit);
    CHECK(opened.error().sys_errno == EMFILE);
    CHECK(contains(opened.error().hint, "ulimit -n"));
    CHECK(contains(opened.error().message, "thread"));
}

TEST_CASE("events the kernel does not know, or attributes it rejects, are reported as such") {
    perf_event_attr attr = sf::kernel::make_attr(SamplingConfig{}, false);
    attr.config = PERF_COUNT_SW_MAX + 7;
    auto unknown = sf::kernel::PerfEvent::open_attr(attr, getpid(), -1, 64);
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.error().code == Errc::kUnsupported);
    CHECK(unknown.error().sys_errno == ENOENT);

    attr = sf::kernel::make_attr(SamplingConfig{}, false);
    attr.sample_stack_user = 1001;   // validate() would have refused it; the kernel does too
    auto rejected = sf::kernel::PerfEvent::open_attr(attr, getpid(), -1, 64);
    REQUIRE_FALSE(rejected.ok());
    CHECK(rejected.error().code == Errc::kInvalidArgument);
    CHECK(rejected.error().sys_errno == EINVAL);
    CHECK(contains(rejected.error().hint, "perf_event_max_sample_rate"));

    // This kernel refuses to mmap an inherited per-thread event (why per-CPU mode exists).
    auto inherited = sf::kernel::PerfEvent::open_attr(sf::kernel::make_attr(SamplingConfig{}, true),
                                                      getpid(), -1, 64);
    REQUIRE_FALSE(inherited.ok());
    CHECK(inherited.error().code == Errc::kInvalidArgument);
    CHECK(contains(inherited.error().message, "mmap"));
}

TEST_CASE("a thread that no longer exists is named as such") {
    const pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, nullptr, 0);
    auto opened = sf::kernel::PerfEvent::open_thread(child, SamplingConfig{});
    REQUIRE_FALSE(opened.ok());
    CHECK(opened.error().sys_errno == ESRCH);
    CHECK(contains(opened.error().message, std::to_string(child)));
    CHECK(contains(opened.error().hint, "exited"));
}

TEST_CASE("sampling a process one may not observe points at perf_event_paranoid and CAP_PERFMON") {
    // As root this runs as nobody in a child; either way, pid 1 belongs to someone else.
    const std::string verdict = in_child([]() -> std::string {
        if (std::string dropped = drop_to_nobody(); !dropped.empty()) return dropped;
        auto opened = sf::kernel::PerfEvent::open_thread(1, SamplingConfig{});
        if (opened.ok()) return "opened pid 1 unprivileged";
        const sf::Error& error = opened.error();
        if (error.code != Errc::kPermission) return "code " + std::string(sf::errc_name(error.code)) + ": " + error.describe();
        if (!contains(error.hint, "kernel.perf_event_paranoid is ")) return "hint lacks the sysctl: " + error.hint;
        if (!contains(error.hint, "CAP_PERFMON")) return "hint lacks CAP_PERFMON: " + error.hint;
        return "";
    });
    CHECK(verdict == "");
}

TEST_CASE("a ring beyond the locked-memory allowance points at perf_event_mlock_kb") {
    if (getuid() != 0) {
        // Dropping CAP_IPC_LOCK and the per-user accounting need a fresh user: only root can switch.
        WARN("not root: the mmap EPERM path is not exercised");
        return;
    }
    const std::string verdict = in_child([]() -> std::string {
        if (std::string dropped = drop_to_nobody(); !dropped.empty()) return dropped;
        rlimit none{0, 0};
        if (setrlimit(RLIMIT_MEMLOCK, &none) != 0) return "setrlimit";
        SamplingConfig small;
        small.ring_pages = 8;
        small.stack_bytes = 1024;
        auto fine = sf::kernel::PerfEvent::open_thread(static_cast<pid_t>(syscall(SYS_gettid)), small);
        if (!fine) return "a small ring failed too: " + fine.error().describe();
        SamplingConfig huge;
        huge.ring_pages = 8192;   // 32 MB, above perf_event_mlock_kb x CPUs
        auto opened = sf::kernel::PerfEvent::open_thread(static_cast<pid_t>(syscall(SYS_gettid)), huge);
        if (opened.ok()) return "a 32 MB ring was granted";
        const sf::Error& error = opened.error();
        if (error.code != Errc::kResourceLimit) return "code " + std::string(sf::errc_name(error.code)) + ": " + error.describe();
        if (!contains(error.hint, "kernel.perf_event_mlock_kb")) return "hint lacks the sysctl: " + error.hint;
        if (!contains(error.message, "mmap")) return "message lacks mmap: " + error.message;
        return "";
    });
    CHECK(verdict == "");
}

TEST_CASE("CPU lists in the kernel's format parse, anything else is an error naming the text") {
    using sf::kernel::parse_cpu_list;
    CHECK(parse_cpu_list("0").value() == std::vector<int>{0});
    CHECK(parse_cpu_list("0-3,5,7-8").value() == std::vector<int>{0, 1, 2, 3, 5, 7, 8});
    CHECK(parse_cpu_list("").value().empty());
    for (const char* bad : {"a", "3-1", "-1", "0-", "1,,x", "2 3", "0-3x"}) {
        INFO(bad);
        const auto parsed = parse_cpu_list(bad);
        REQUIRE_FALSE(parsed.ok());
        CHECK(parsed.error().code == Errc::kCorrupt);
        CHECK(contains(parsed.error().describe(), std::string("'") + bad + "'"));
    }
}

TEST_CASE("the CPUs a thread may run on follow its affinity, not the CPUs online") {
    const auto online = sf::kernel::online_cpus();
    REQUIRE(online.ok());
    const auto all = sf::kernel::cpus_allowed();
    REQUIRE(all.ok());
    CHECK(!all->empty());
    for (int cpu : *all) CHECK(std::find(online->begin(), online->end(), cpu) != online->end());
    // One thread narrowed to one CPU, as `taskset -c N` or a container's cpuset would: it, and
    // nothing else in the process, sees that CPU alone.
    const int last = all->back();
    std::vector<int> narrowed;
    std::thread([&] {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(static_cast<size_t>(last), &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) return;
        narrowed = sf::kernel::cpus_allowed().value();
    }).join();
    CHECK(narrowed == std::vector<int>{last});
    CHECK(sf::kernel::cpus_allowed().value() == *all);
}
