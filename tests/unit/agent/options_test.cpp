// The agent's option string: every option's good values, and for every bad option or value a
// message that names the option and says what it accepts.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "options.hpp"
#include "options_test_support.hpp"
#include "test_env.hpp"

using sf::agent::AgentOptions;
using sf::agent::LogLevel;
using sf::agent::parse_options;
using sf::agent::SamplingMode;
using sf::kernel::ClockKind;

namespace {

using sf::test::parse_error;
using sf::test::parse_ok;

using sf::test::contains;

}  // namespace

TEST_CASE("no options give the documented defaults") {
    for (const char* text : {"", ",", ",,"}) {
        const AgentOptions options = parse_ok(text);
        CHECK(options.interval_ns == 1'000'000);
        CHECK(options.stack_bytes == 16384);
        CHECK(options.stack_auto);
        CHECK(options.clock == ClockKind::kTask);
        CHECK(options.ring_pages == 0);
        CHECK(options.mode_auto);   // resolved at load: resolve_mode
        CHECK(options.record_path.empty());
        CHECK_FALSE(options.records());
        CHECK_FALSE(options.validate);
        CHECK(options.log_path.empty());
        CHECK(options.log_level == LogLevel::kInfo);
    }
}

TEST_CASE("interval accepts the durations parse_interval accepts") {
    CHECK(parse_ok("interval=100us").interval_ns == 100'000);
    CHECK(parse_ok("interval=1ms").interval_ns == 1'000'000);
    CHECK(parse_ok("interval=10ms").interval_ns == 10'000'000);
    CHECK(parse_ok("interval=2s").interval_ns == 2'000'000'000);
    CHECK(parse_ok("interval=250000").interval_ns == 250'000);
    CHECK(parse_ok("interval=50us").interval_ns == 50'000);
    // Below 50 us the kernel's timer interrupt would keep a CPU to itself (kMinSamplingPeriodNs),
    // though perf takes down to 10 us.
    for (const char* bad : {"fast", "1parsec", "-1ms", "0", "ms", "5us", "10us", "49us"}) {
        const std::string message = parse_error(std::string("interval=") + bad);
        CHECK(message == "bad value '" + std::string(bad) +
                             "' for interval: expected a duration of at least 50us (like 100us, 1ms, 10ms), or auto");
    }
}

TEST_CASE("stack takes auto or a multiple of 8 up to 65528") {
    CHECK(parse_ok("stack=auto").stack_auto);
    CHECK(parse_ok("stack=auto").stack_bytes == 16384);
    CHECK_FALSE(parse_ok("stack=16384").stack_auto);
    CHECK(parse_ok("stack=65528,stack=auto").stack_auto);
    CHECK(parse_ok("stack=8").stack_bytes == 8);
    CHECK(parse_ok("stack=4096").stack_bytes == 4096);
    CHECK(parse_ok("stack=65528").stack_bytes == 65528);
    for (const char* bad : {"0", "12", "65536", "16k", "-8", "x"}) {
        const std::string message = parse_error(std::string("stack=") + bad);
        CHECK(contains(message, "bad value '" + std::string(bad) + "' for stack: expected"));
        CHECK(contains(message, "multiple of 8"));
        CHECK(contains(message, "65528"));
        CHECK(contains(message, "auto"));
    }
}

TEST_CASE("clock is task or cpu") {
    CHECK(parse_ok("clock=task").clock == ClockKind::kTask);
    CHECK(parse_ok("clock=cpu").clock == ClockKind::kCpu);
    CHECK(parse_error("clock=wall") == "bad value 'wall' for clock: expected task or cpu");
}

TEST_CASE("depth is the most frames a trace keeps, 2048 unless given") {
    CHECK(parse_ok("").max_frames == 2048);
    CHECK(parse_ok("depth=1").max_frames == 1);
    CHECK(parse_ok("depth=8192").max_frames == 8192);
    CHECK(parse_ok("depth=65536").max_frames == 65536);
    for (const char* bad : {"0", "65537", "-5", "deep", ""}) {
        const std::string message = parse_error(std::string("depth=") + bad);
        CHECK(contains(message, "for depth: expected a number of frames from 1 to 65536"));
    }
}

TEST_CASE("ring is a power of two; without it the ring holds about 10 ms of samples") {
    CHECK(parse_ok("ring=1").ring_pages == 1);
    CHECK(parse_ok("ring=64").ring_pages == 64);
    CHECK(parse_ok("ring=1024").sampling_config().ring_pages == 1024);
    for (const char* bad : {"0", "3", "100", "pages"}) {
        const std::string message = parse_error(std::string("ring=") + bad);
        CHECK(contains(message, "bad value '" + std::string(bad) + "' for ring: expected"));
        CHECK(contains(message, "power of two"));
    }
    const uint32_t at_1ms = parse_ok("interval=1ms").sampling_config().ring_pages;
    const uint32_t at_100us = parse_ok("interval=100us").sampling_config().ring_pages;
    CHECK(at_1ms == sf::kernel::SamplingConfig{}.ring_pages);
    CHECK(at_100us > at_1ms);
    CHECK((at_100us & (at_100us - 1)) == 0);
    CHECK(static_cast<uint64_t>(at_100us) * 4096 >= 100 * sf::kernel::sample_record_bytes(16384));
    CHECK(parse_ok("interval=50us").sampling_config().ring_pages == 1024);   // capped
}

TEST_CASE("mode=cpu: stack=auto takes the largest fragment its ring holds (one size for every thread), a given size stays") {
    const auto cpu = parse_ok("mode=cpu");
    CHECK(cpu.stack_bytes == sf::kernel::kMaxStackBytes);
    CHECK_FALSE(cpu.stack_auto);
    // The ring the fragment was sized for, one per CPU: at 1 ms a ring for 10 ms of 64 KB samples
    // (256 pages) made the reader cycle every 7.5 ms.
    CHECK(cpu.sampling_config().ring_pages == 1024);
    CHECK(parse_ok("mode=cpu,interval=10ms").sampling_config().ring_pages == 1024);
    CHECK(parse_ok("mode=cpu,stack=8192").sampling_config().ring_pages == 1024);
    CHECK(parse_ok("mode=cpu,ring=64").sampling_config().ring_pages == 64);
    CHECK(parse_ok("mode=thread").sampling_config().ring_pages == 128);
    CHECK(parse_ok("stack=auto,mode=cpu").stack_bytes == sf::kernel::kMaxStackBytes);
    const auto fixed = parse_ok("mode=cpu,stack=8192");
    CHECK(fixed.stack_bytes == 8192);
    CHECK_FALSE(fixed.stack_auto);
    // A per-CPU ring takes every sample of its CPU, each reserving the whole size: at 100 us the
    // largest fragment whose 10 ms of samples fit the 4 MB ring, never below the default.
    const auto fast = parse_ok("mode=cpu,interval=100us");
    CHECK(fast.stack_bytes > 16384);
    CHECK(fast.stack_bytes < sf::kernel::kMaxStackBytes);
    CHECK(fast.stack_bytes % 8 == 0);
    CHECK(101 * sf::kernel::sample_record_bytes(fast.stack_bytes) <= 1024 * 4096);
    CHECK(101 * sf::kernel::sample_record_bytes(fast.stack_bytes + 8) > 1024 * 4096);
    CHECK(fast.sampling_config().ring_pages == 1024);
    const auto fastest = parse_ok("mode=cpu,interval=50us");
    CHECK(fastest.stack_bytes >= 16384);
    CHECK(fastest.stack_bytes < fast.stack_bytes);
    CHECK(201 * sf::kernel::sample_record_bytes(fastest.stack_bytes) <= 1024 * 4096);
    CHECK(201 * sf::kernel::sample_record_bytes(fastest.stack_bytes + 8) > 1024 * 4096);
    CHECK(parse_ok("mode=cpu,interval=100us,ring=4096").stack_bytes == sf::kernel::kMaxStackBytes);
    const auto thread = parse_ok("mode=thread");
    CHECK(thread.stack_auto);
    CHECK(thread.stack_bytes == 16384);
}

TEST_CASE("mode is auto, thread, cpu or jvmti") {
    CHECK(parse_ok("mode=thread").mode == SamplingMode::kThread);
    CHECK(parse_ok("mode=cpu").mode == SamplingMode::kCpu);
    CHECK(parse_ok("mode=jvmti").mode == SamplingMode::kJvmti);
    for (const char* given : {"mode=thread", "mode=cpu", "mode=jvmti", "mode=auto,mode=cpu"}) {
        CHECK_FALSE(parse_ok(given).mode_auto);
    }
    CHECK(parse_ok("mode=auto").mode_auto);
    CHECK(parse_ok("mode=cpu,mode=auto").mode_auto);
    CHECK(parse_error("mode=process") == "bad value 'process' for mode: expected auto, thread, cpu or jvmti");
}

namespace {
AgentOptions resolved(const std::string& text, bool attach) {
    AgentOptions options = parse_ok(text);
    sf::agent::resolve_mode(options, attach);
    return options;
}
}  // namespace

TEST_CASE("mode=auto (the default): per-CPU events when loaded at the JVM's start, per-thread ones on attach") {
    for (const char* text : {"", "mode=auto", "interval=2ms,file=x.html", "backend=perf", "validate"}) {
        INFO(text);
        const AgentOptions start = resolved(text, false);
        CHECK(start.mode == SamplingMode::kCpu);
        CHECK(contains(start.mode_reason, "loaded at the JVM's start"));
        const AgentOptions attach = resolved(text, true);
        CHECK(attach.mode == SamplingMode::kThread);
        CHECK(contains(attach.mode_reason, "attached"));
    }
    // mode=cpu's one fragment size follows the choice; per-thread stack=auto stays on attach.
    CHECK(resolved("", false).stack_bytes == sf::kernel::kMaxStackBytes);
    CHECK_FALSE(resolved("", false).stack_auto);
    CHECK(resolved("", true).stack_auto);
    CHECK(resolved("", true).stack_bytes == 16384);
    CHECK(resolved("stack=8192", false).stack_bytes == 8192);
    // What needs per-thread events keeps mode=thread at the start too, and says so.
    const std::pair<const char*, const char*> per_thread[] = {
        {"backend=signal", "backend=signal"},
        {"events=cpu,switch", "events=switch"},
        {"events=switch", "events=switch"},
        {"threads=java", "threads=java"},
        {"interval=auto", "interval=auto"},
        {"interval=100us", "below 1 ms"},
        {"interval=999us", "below 1 ms"},
    };
    for (const auto& [text, reason] : per_thread) {
        INFO(text);
        const AgentOptions start = resolved(text, false);
        CHECK(start.mode == SamplingMode::kThread);
        CHECK(contains(start.mode_reason, reason));
        CHECK(start.stack_auto == !contains(text, "stack="));
    }
    // The log line and the stop summary name the mode and why.
    CHECK(contains(sf::agent::describe(resolved("", false)), ",mode=auto(cpu),"));
    CHECK(contains(sf::agent::describe(resolved("", true)), ",mode=auto(thread),"));
    CHECK(sf::agent::mode_text(resolved("", false)) ==
          "cpu (mode=auto: " + resolved("", false).mode_reason + ")");
}

TEST_CASE("an explicit mode= is not changed by resolve_mode, at the start or on attach") {
    for (const bool attach : {false, true}) {
        CHECK(resolved("mode=thread", attach).mode == SamplingMode::kThread);
        CHECK(resolved("mode=thread", attach).stack_auto);
        CHECK(resolved("mode=cpu", attach).mode == SamplingMode::kCpu);
        CHECK(resolved("mode=jvmti", attach).mode == SamplingMode::kJvmti);
        CHECK(resolved("mode=cpu", attach).mode_reason.empty());
        CHECK(sf::agent::mode_text(resolved("mode=thread", attach)) == "thread (mode=thread)");
        CHECK(contains(sf::agent::describe(resolved("mode=cpu", attach)), ",mode=cpu,"));
    }
}

namespace {
// A stand-in for the kernel's ring locking: rings up to `lockable_pages` per CPU map, larger ones
// fail as mmap does past kernel.perf_event_mlock_kb and ulimit -l. It records what was asked.
struct FakeRings {
    uint32_t lockable_pages = 0;
    sf::Errc failure = sf::Errc::kResourceLimit;
    std::vector<sf::kernel::SamplingConfig> asked;
    sf::agent::RingProbe probe() {
        return [this](const sf::kernel::SamplingConfig& config) -> sf::Status {
            asked.push_back(config);
            if (config.ring_pages <= lockable_pages) return {};
            return sf::make_error(failure, "mmap of the ring of perf_event_open(task-clock, process 1 on cpu 0)",
                                  "raise kernel.perf_event_mlock_kb");
        };
    }
};

AgentOptions resolved_with(const std::string& text, FakeRings& rings) {
    AgentOptions options = parse_ok(text);
    sf::agent::resolve_mode(options, false, rings.probe());
    return options;
}
}  // namespace

TEST_CASE("mode=auto: per-CPU rings that cannot be locked are halved, down to 128 pages, then per-thread events") {
    SECTION("everything fits: the automatic ring, asked once") {
        FakeRings rings{1024, sf::Errc::kResourceLimit, {}};
        const AgentOptions options = resolved_with("", rings);
        CHECK(options.mode == SamplingMode::kCpu);
        REQUIRE(rings.asked.size() == 1);
        CHECK(rings.asked[0].ring_pages == 1024);
        CHECK(rings.asked[0].stack_bytes == sf::kernel::kMaxStackBytes);   // what the reader will open
        CHECK_FALSE(contains(options.mode_reason, "pages per CPU"));
    }
    SECTION("a smaller ring fits: mode=cpu with it, stack=auto sized for it, and the reason says so") {
        FakeRings rings{256, sf::Errc::kResourceLimit, {}};
        const AgentOptions options = resolved_with("", rings);
        CHECK(options.mode == SamplingMode::kCpu);
        REQUIRE(rings.asked.size() == 3);   // 1024, 512, 256
        CHECK(rings.asked[1].ring_pages == 512);
        CHECK(options.sampling_config().ring_pages == 256);
        CHECK(rings.asked[2].stack_bytes == options.stack_bytes);
        CHECK(options.stack_bytes <= sf::kernel::kMaxStackBytes);
        CHECK(contains(options.mode_reason, "loaded at the JVM's start"));
        CHECK(contains(options.mode_reason, "ring 256 pages per CPU, not 1024"));
        CHECK(contains(options.mode_reason, "ulimit -l"));
    }
    SECTION("not even 128 pages: per-thread events, with stack=auto per thread again") {
        FakeRings rings{64, sf::Errc::kResourceLimit, {}};
        const AgentOptions options = resolved_with("", rings);
        CHECK(options.mode == SamplingMode::kThread);
        CHECK(rings.asked.back().ring_pages == sf::agent::kMinCpuRingPages);
        CHECK(rings.asked.size() == 4);   // 1024 .. 128
        CHECK(options.stack_auto);
        CHECK(options.stack_bytes == 16384);
        CHECK(options.ring_pages == 0);
        CHECK(contains(options.mode_reason, "the per-CPU rings cannot be locked"));
        CHECK(contains(options.mode_reason, "perf_event_mlock_kb"));
        CHECK(contains(options.mode_reason, "per-thread events instead"));
    }
    SECTION("ring= given: not shrunk, per-thread events if it cannot be locked") {
        FakeRings rings{256, sf::Errc::kResourceLimit, {}};
        const AgentOptions options = resolved_with("ring=512", rings);
        CHECK(options.mode == SamplingMode::kThread);
        CHECK(rings.asked.size() == 1);
        CHECK(options.ring_pages == 512);
    }
    SECTION("perf events refused outright: per-thread events (whose denial falls back to signals)") {
        FakeRings rings{1024, sf::Errc::kPermission, {}};
        rings.lockable_pages = 0;
        const AgentOptions options = resolved_with("", rings);
        CHECK(options.mode == SamplingMode::kThread);
        CHECK(rings.asked.size() == 1);
        CHECK(contains(options.mode_reason, "per-CPU events cannot be opened"));
    }
    SECTION("not asked on attach, for an explicit mode=, or when an option needs per-thread events") {
        FakeRings rings{0, sf::Errc::kResourceLimit, {}};
        for (const char* text : {"mode=cpu", "mode=thread", "threads=java", "events=switch", "backend=signal"}) {
            AgentOptions options = parse_ok(text);
            sf::agent::resolve_mode(options, false, rings.probe());
        }
        AgentOptions attached = parse_ok("");
        sf::agent::resolve_mode(attached, true, rings.probe());
        CHECK(rings.asked.empty());
        CHECK(attached.mode == SamplingMode::kThread);
    }
}

TEST_CASE("mode=cpu's automatic ring: 4 MB per CPU up to 16 CPUs, then at most 64 MB in all, at least 1 MB each") {
    using sf::agent::cpu_mode_auto_ring_pages;
    for (uint32_t cpus : {0u, 1u, 2u, 8u, 16u}) CHECK(cpu_mode_auto_ring_pages(cpus) == 1024);
    CHECK(cpu_mode_auto_ring_pages(17) == 512);
    CHECK(cpu_mode_auto_ring_pages(32) == 512);
    CHECK(cpu_mode_auto_ring_pages(33) == 256);
    CHECK(cpu_mode_auto_ring_pages(64) == 256);
    CHECK(cpu_mode_auto_ring_pages(256) == 256);   // the floor: 16 fragments of 64 KB
    for (uint32_t cpus = 1; cpus <= 64; ++cpus) {
        const uint32_t pages = cpu_mode_auto_ring_pages(cpus);
        CHECK((pages & (pages - 1)) == 0);
        CHECK(uint64_t{pages} * cpus <= 16384);
    }

    FakeRings rings{1024, sf::Errc::kResourceLimit, {}};
    AgentOptions many = parse_ok("");
    many.cpus_allowed = 64;
    many.cpus_online = 64;
    sf::agent::resolve_mode(many, false, rings.probe());
    CHECK(many.mode == SamplingMode::kCpu);
    CHECK(many.sampling_config().ring_pages == 256);
    REQUIRE(rings.asked.size() == 1);
    CHECK(rings.asked[0].ring_pages == 256);
    // 1 MB still holds 10 ms of the largest fragments at 1 ms: stack=auto keeps them.
    CHECK(many.stack_bytes == sf::kernel::kMaxStackBytes);
    CHECK(contains(many.mode_reason, "ring 256 pages per CPU, at most 64 MB for 64 CPUs"));
    CHECK_FALSE(contains(many.mode_reason, " of 64 online"));
    // ring= is what the user asked for, whatever the CPUs.
    AgentOptions given = parse_ok("mode=cpu,ring=1024");
    given.cpus_allowed = 64;
    sf::agent::resolve_mode(given, false);
    CHECK(given.sampling_config().ring_pages == 1024);
}

TEST_CASE("mode=auto says when the JVM may run on fewer CPUs than are online (per-CPU events on those only)") {
    AgentOptions options = parse_ok("");
    options.cpus_allowed = 4;
    options.cpus_online = 64;
    sf::agent::resolve_mode(options, false);
    CHECK(options.mode == SamplingMode::kCpu);
    CHECK(contains(options.mode_reason, "ring per CPU it may run on (4 of 64 online: its affinity or cpuset)"));
    CHECK(options.sampling_config().ring_pages == 1024);   // sized for the 4, not the 64
    AgentOptions all = parse_ok("");
    all.cpus_allowed = 2;
    all.cpus_online = 2;
    sf::agent::resolve_mode(all, false);
    CHECK_FALSE(contains(all.mode_reason, "online"));
}

TEST_CASE("backend is auto by default, or perf or signal") {
    using sf::agent::SamplingBackend;
    CHECK(parse_ok("").backend == SamplingBackend::kAuto);
    CHECK(parse_ok("backend=perf").backend == SamplingBackend::kPerf);
    CHECK(parse_ok("backend=signal").backend == SamplingBackend::kSignal);
    CHECK(parse_error("backend=ebpf") == "bad value 'ebpf' for backend: expected auto, perf or signal");
}

TEST_CASE("interval=auto adapts from the default period within a budget") {
    const AgentOptions defaults = parse_ok("");
    CHECK_FALSE(defaults.interval_auto);
    CHECK(defaults.budget_percent == 1.0);
    const AgentOptions adaptive = parse_ok("interval=auto,budget=0.5%");
    CHECK(adaptive.interval_auto);
    CHECK(adaptive.interval_ns == 1'000'000);
    CHECK(adaptive.budget_percent == 0.5);
    CHECK_FALSE(parse_ok("interval=auto,interval=2ms").interval_auto);   // the last one wins
    CHECK(contains(sf::agent::describe(adaptive), "interval=auto"));
    CHECK(contains(sf::agent::describe(adaptive), "budget=0.50%"));
    for (const char* bad : {"budget=1", "budget=0%", "budget=51%", "budget=x%", "budget=%"}) {
        CHECK(contains(parse_error(bad), "for budget: expected a percentage from 0.01% to 50%"));
    }
}

TEST_CASE("events is a comma-separated list of cpu and switch") {
    const AgentOptions defaults = parse_ok("");
    CHECK(defaults.sample_cpu);
    CHECK_FALSE(defaults.sample_switch);
    const AgentOptions both = parse_ok("events=cpu,switch,interval=2ms");
    CHECK(both.sample_cpu);
    CHECK(both.sample_switch);
    CHECK(both.interval_ns == 2'000'000);
    const AgentOptions off_cpu_only = parse_ok("events=switch");
    CHECK_FALSE(off_cpu_only.sample_cpu);
    CHECK(off_cpu_only.sample_switch);
    CHECK(contains(sf::agent::describe(both), "events=cpu,switch"));
    CHECK(parse_error("events=cpu,disk") == "bad value 'disk' for events: expected cpu, switch or both (events=cpu,switch)");
    CHECK(parse_error("events=io").find("bad value 'io' for events") == 0);
    // A bare word after another option is still an unknown option, not a list item.
    CHECK(contains(parse_error("interval=1ms,switch"), "unknown option 'switch'"));
    // Switch events are per-thread perf events.
    CHECK(parse_error("events=cpu,switch,mode=cpu") ==
          "events=switch needs mode=thread (or mode=auto, the default): drop mode=cpu/jvmti, or sample with events=cpu only");
    CHECK(parse_ok("events=cpu,switch,mode=auto").sample_switch);
    CHECK(parse_error("events=switch,backend=signal") ==
          "events=switch needs perf events, not backend=signal: use backend=perf or auto");
}

TEST_CASE("focus and exclude name a method or class") {
    const AgentOptions options = parse_ok("focus=org.h2.command.Command.executeQuery,exclude=java.lang.Thread");
    CHECK(options.focus == "org.h2.command.Command.executeQuery");
    CHECK(options.exclude == "java.lang.Thread");
    CHECK(contains(parse_error("focus="), "missing value for focus"));
    CHECK(contains(sf::agent::describe(options), "focus=org.h2.command.Command.executeQuery"));
    CHECK(parse_ok("focus=org/h2/Outer$Inner.<init>").focus == "org/h2/Outer$Inner.<init>");
    // A pattern no method can match stops the agent at load, naming the option.
    CHECK(parse_error("focus=org..h2.Command") ==
          "bad value 'org..h2.Command' for focus: expected a method (pkg.Class.method) or class (pkg.Class)");
    CHECK(contains(parse_error("exclude=java.lang.Thread.run()"), "bad value 'java.lang.Thread.run()' for exclude"));
}

TEST_CASE("record names a file; /dev/null means count and discard") {
    const AgentOptions options = parse_ok("record=/tmp/out.sfr");
    CHECK(options.record_path == "/tmp/out.sfr");
    CHECK(options.records());
    CHECK_FALSE(parse_ok("record=/dev/null").records());
    CHECK(contains(parse_error("record="), "missing value for record: expected a file name"));
}

TEST_CASE("validate is a flag") {
    CHECK(parse_ok("validate").validate);
    CHECK(parse_ok("validate=true").validate);
    CHECK_FALSE(parse_ok("validate=false").validate);
    CHECK(parse_error("validate=maybe") == "bad value 'maybe' for validate: expected no value, true or false");
}

TEST_CASE("log and loglevel") {
    CHECK(parse_ok("log=stderr").log_path == "stderr");
    CHECK(parse_ok("log=/tmp/sf.log").log_path == "/tmp/sf.log");
    CHECK(contains(parse_error("log="), "missing value for log"));
    CHECK(parse_ok("loglevel=error").log_level == LogLevel::kError);
    CHECK(parse_ok("loglevel=warn").log_level == LogLevel::kWarn);
    CHECK(parse_ok("loglevel=info").log_level == LogLevel::kInfo);
    CHECK(parse_ok("loglevel=debug").log_level == LogLevel::kDebug);
    CHECK(parse_error("loglevel=verbose") == "bad value 'verbose' for loglevel: expected error, warn, info or debug");
}

TEST_CASE("several options, in any order; the last of a repeated option wins") {
    const AgentOptions options =
        parse_ok("record=/tmp/a.sfr,interval=100us,stack=8192,clock=cpu,ring=256,mode=cpu,validate,"
                 "log=/tmp/l,loglevel=debug,interval=10ms");
    CHECK(options.interval_ns == 10'000'000);
    CHECK(options.stack_bytes == 8192);
    CHECK(options.clock == ClockKind::kCpu);
    CHECK(options.ring_pages == 256);
    CHECK(options.mode == SamplingMode::kCpu);
    CHECK(options.record_path == "/tmp/a.sfr");
    CHECK(options.validate);
    CHECK(options.log_path == "/tmp/l");
    CHECK(options.log_level == LogLevel::kDebug);
    const sf::kernel::SamplingConfig config = options.sampling_config();
    CHECK(config.period_ns == 10'000'000);
    CHECK(config.stack_bytes == 8192);
    CHECK(config.ring_pages == 256);
    CHECK(config.clock == ClockKind::kCpu);
}

TEST_CASE("an unknown option is named together with every accepted one") {
    CHECK(parse_error("intervall=1ms") ==
          "unknown option 'intervall' (accepted: interval, budget, stack, clock, ring, mode, threads, backend, events, record, validate, log, loglevel, breadcrumbs, reader, file, loop, push, push_name, push_labels, focus, exclude, title, group, depth, start, stop, dump, status, reply)");
    CHECK(contains(parse_error("interval=1ms,bogus=1"), "unknown option 'bogus'"));
    CHECK(contains(parse_error("begin"), "unknown option 'begin'"));
    CHECK(sf::agent::accepted_option_names() == "interval, budget, stack, clock, ring, mode, threads, backend, events, record, validate, log, loglevel, breadcrumbs, reader, file, loop, push, push_name, push_labels, focus, exclude, title, group, depth, start, stop, dump, status, reply");
}

TEST_CASE("an option that needs a value says so") {
    for (const char* name : {"interval", "stack", "clock", "ring", "mode", "record", "log", "loglevel"}) {
        for (const std::string& text : {std::string(name), std::string(name) + "="}) {
            CHECK(contains(parse_error(text), "missing value for " + std::string(name) + ": expected"));
        }
    }
}

TEST_CASE("describe shows the effective values") {
    const std::string text = sf::agent::describe(parse_ok("interval=100us,validate,record=/tmp/r.sfr"));
    CHECK(contains(text, "interval=100000ns"));
    CHECK(contains(text, "ring=512"));
    CHECK(contains(text, "record=/tmp/r.sfr"));
    CHECK(contains(text, "validate"));
}

TEST_CASE("breadcrumbs are on by default and can be turned off") {
    CHECK(parse_ok("").breadcrumbs);
    CHECK_FALSE(parse_ok("breadcrumbs=off").breadcrumbs);
    CHECK(parse_ok("breadcrumbs=off,breadcrumbs=on").breadcrumbs);
    CHECK(parse_error("breadcrumbs=yes") == "bad value 'yes' for breadcrumbs: expected on or off");
    CHECK(contains(sf::agent::describe(parse_ok("breadcrumbs=off")), "breadcrumbs=off"));
}

TEST_CASE("group= keeps threads apart in the live profile: none (the default), thread or pool") {
    CHECK(parse_ok("").group == sf::agent::ThreadGrouping::kNone);
    CHECK(parse_ok("group=thread").group == sf::agent::ThreadGrouping::kThread);
    CHECK(parse_ok("group=pool").group == sf::agent::ThreadGrouping::kPool);
    CHECK(parse_ok("group=pool,group=none").group == sf::agent::ThreadGrouping::kNone);
    CHECK(parse_error("group=threads") ==
          "bad value 'threads' for group: expected none, thread (a subtree per thread) or pool (per thread pool)");
    CHECK(contains(sf::agent::describe(parse_ok("group=pool")), "group=pool"));
    CHECK_FALSE(contains(sf::agent::describe(parse_ok("")), "group="));
}

TEST_CASE("reader= asks for a real-time reader (the default) or leaves it a normal thread") {
    CHECK(parse_ok("").realtime_reader);
    CHECK_FALSE(parse_ok("reader=normal").realtime_reader);
    CHECK(parse_ok("reader=normal,reader=realtime").realtime_reader);
    CHECK(parse_error("reader=fifo") ==
          "bad value 'fifo' for reader: expected realtime (the default: real-time priority where permitted) or normal");
    CHECK(contains(sf::agent::describe(parse_ok("reader=normal")), "reader=normal"));
}

TEST_CASE("threads= picks all threads (the default) or Java threads only") {
    CHECK(parse_ok("").all_threads);
    CHECK(parse_ok("threads=all").all_threads);
    CHECK_FALSE(parse_ok("threads=java").all_threads);
    CHECK(contains(parse_error("threads=native"), "threads"));
    CHECK(contains(parse_error("threads=native"), "all or java"));
    CHECK(contains(sf::agent::describe(parse_ok("threads=java")), ",threads=java"));
}
