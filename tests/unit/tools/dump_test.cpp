#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "shell.hpp"
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "../events/recording_support.hpp"

using namespace sf;
using namespace sf::test;

namespace {

using sf::test::CommandResult;

// Runs the built CLI; `redirect` may add e.g. "2>&1".
CommandResult run_stackfrag(const std::string& arguments, const std::string& redirect = "2>/dev/null") {
    const std::string command = std::string(STACKFRAG_BINARY_DIR "/bin/stackfrag ") + arguments + " " + redirect;
    return sf::test::run_shell(command);
}

size_t occurrences(const std::string& text, const std::string& part) {
    size_t count = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
    return count;
}

// A small but complete recording: threads with names, methods the code refers to, stubs, losses.
std::vector<Event> profile_like_events(int compiled_methods) {
    EventFactory factory(21);
    std::vector<Event> events;
    VmInfo vm = factory.vm_info();
    vm.jdk_major = 17;
    vm.vm_version = "17.0.99+1-test";
    events.emplace_back(std::move(vm));
    events.emplace_back(ThreadInfo{10, 101, false, "main"});
    events.emplace_back(ThreadInfo{11, 102, false, "worker-7"});
    for (int i = 0; i < compiled_methods; ++i) {
        const uint64_t method_id = 5000 + static_cast<uint64_t>(i);
        MethodInfo method;
        method.method_id = method_id;
        method.class_name = "com/example/Widget" + std::to_string(i);
        method.name = "spin";
        method.signature = "(I)J";
        events.emplace_back(std::move(method));
        CodeLoad load;
        load.method_id = method_id;
        load.code_begin = 0x7f0000000000ull + 0x10000ull * static_cast<uint64_t>(i);
        load.code_end = load.code_begin + 100 + static_cast<uint64_t>(i);
        load.comp_level = 4;
        events.emplace_back(std::move(load));
    }
    events.emplace_back(CodeUnload{20, 5000, 0x7f0000000000ull});
    events.emplace_back(Stub{21, "StubRoutines::call_stub", 0x7e0000000000ull, 0x7e0000000400ull, 2});
    events.emplace_back(Stub{22, "Interpreter", 0x7e0000001000ull, 0x7e0000021000ull, -1});
    const uint32_t tids[] = {101, 101, 102, 101, 103, 102, 101, 101, 103, 101, 101, 102};
    for (uint32_t tid : tids) {
        Sample sample = factory.sample(1024 * (tid - 99));   // a stack size per thread
        sample.tid = tid;
        events.emplace_back(std::move(sample));
    }
    events.emplace_back(Lost{30, 101, 5});
    events.emplace_back(Lost{31, 0, 6});
    events.emplace_back(ModuleMap{32, 0x1000, 0x2000, 0, "/usr/lib/jvm/lib/server/libjvm.so", "", {}});
    return events;
}

struct ExpectedCounts {
    std::map<std::string, uint64_t> per_kind;
    std::map<std::string, uint64_t> samples_per_tid;
    std::map<std::string, uint64_t> stack_bytes_per_tid;
    uint64_t samples = 0;
    uint64_t lost = 0;
};

ExpectedCounts count_expected(const std::vector<Event>& events) {
    ExpectedCounts expected;
    for (const auto& event : events) {
        ++expected.per_kind[kind_name(kind_of(event))];
        if (const auto* sample = std::get_if<Sample>(&event)) {
            ++expected.samples;
            ++expected.samples_per_tid[std::to_string(sample->tid)];
            expected.stack_bytes_per_tid[std::to_string(sample->tid)] += sample->stack.size();
        }
        if (const auto* lost = std::get_if<Lost>(&event)) expected.lost += lost->count;
    }
    return expected;
}

void check_counts(const nlohmann::json& dump, const ExpectedCounts& expected) {
    CHECK(dump.at("samples").get<uint64_t>() == expected.samples);
    uint64_t by_source = 0;   // clock, switch, signal
    for (const auto& [source, n] : dump.at("samples_by_source").items()) by_source += n.get<uint64_t>();
    CHECK(by_source == expected.samples);
    CHECK(dump.at("lost").get<uint64_t>() == expected.lost);
    std::map<std::string, uint64_t> threads;
    for (const auto& [tid, samples] : dump.at("threads").items()) threads[tid] = samples.get<uint64_t>();
    CHECK(threads == expected.samples_per_tid);
    std::map<std::string, uint64_t> stack_bytes;
    for (const auto& [tid, bytes] : dump.at("thread_stack_bytes").items()) stack_bytes[tid] = bytes.get<uint64_t>();
    CHECK(stack_bytes == expected.stack_bytes_per_tid);
    for (EventKind kind : {EventKind::kSample, EventKind::kCodeLoad, EventKind::kCodeUnload, EventKind::kStub,
                           EventKind::kMethod, EventKind::kVmInfo, EventKind::kOracle, EventKind::kThread,
                           EventKind::kLost, EventKind::kModule}) {
        INFO(kind_name(kind));
        const auto found = expected.per_kind.find(kind_name(kind));
        CHECK(dump.at("events").at(kind_name(kind)).get<uint64_t>() ==
              (found == expected.per_kind.end() ? 0 : found->second));
    }
}

}  // namespace

TEST_CASE("dump --json reports the header, counts per kind and per thread, VM facts and code") {
    ScratchDir dir;
    const std::string path = dir.file("profile.sfr");
    const auto events = profile_like_events(25);
    const RecordingHeader header = sample_header();
    write_recording(path, events, 4096, header);

    const CommandResult result = run_stackfrag("dump --json '" + path + "'");
    REQUIRE(result.exit_code == 0);
    const nlohmann::json dump = nlohmann::json::parse(result.output);
    check_counts(dump, count_expected(events));
    CHECK(dump.at("damage").is_null());
    CHECK(dump.at("header").at("pid") == header.pid);
    CHECK(dump.at("header").at("producer") == header.producer);
    CHECK(dump.at("header").at("command_line") == header.command_line);
    CHECK(dump.at("header").at("created_unix_ns").get<uint64_t>() == header.created_unix_ns);
    CHECK(dump.at("thread_names").at("102") == "worker-7");
    CHECK(dump.at("vm_info").at("jdk_major") == 17);
    CHECK(dump.at("vm_info").at("vm_version") == "17.0.99+1-test");
    CHECK(dump.at("method_table_size") == 25);

    // The biggest compiled method is the last one loaded (size 100 + i), its name resolved.
    const auto& compiled = dump.at("code").at("compiled_by_size");
    REQUIRE(compiled.size() == 20);
    CHECK(compiled.at(0).at("size") == 124);
    CHECK(compiled.at(0).at("method") == "com.example.Widget24.spin(I)J");
    CHECK(compiled.at(19).at("size") == 105);
    const auto& stubs = dump.at("code").at("stubs_by_size");
    REQUIRE(stubs.size() == 2);
    CHECK(stubs.at(0).at("name") == "Interpreter");

    const CommandResult verbose = run_stackfrag("dump --json --verbose '" + path + "'");
    REQUIRE(verbose.exit_code == 0);
    CHECK(nlohmann::json::parse(verbose.output).at("code").at("compiled_by_size").size() == 25);
}

TEST_CASE("dump text names threads and resolves compiled method names") {
    ScratchDir dir;
    const std::string path = dir.file("text.sfr");
    write_recording(path, profile_like_events(25), 1 << 20);

    const CommandResult result = run_stackfrag("dump '" + path + "'");
    REQUIRE(result.exit_code == 0);
    CHECK(occurrences(result.output, "worker-7") == 1);
    // Its samples' mean stack size (3 KiB each) beside its name.
    const size_t line_end = result.output.find("worker-7");
    const size_t line_start = result.output.rfind('\n', line_end);
    CHECK(result.output.substr(line_start, line_end - line_start).find("3072 B") != std::string::npos);
    CHECK(occurrences(result.output, "17.0.99+1-test") == 1);
    CHECK(occurrences(result.output, ".spin(I)J") == 20);
    CHECK(occurrences(result.output, "com.example.Widget24.spin(I)J") == 1);
    CHECK(occurrences(result.output, "com.example.Widget0.spin(I)J") == 0);   // smallest: not in the top 20
    CHECK(occurrences(result.output, "damage") == 0);

    const CommandResult verbose = run_stackfrag("dump --verbose '" + path + "'");
    REQUIRE(verbose.exit_code == 0);
    CHECK(occurrences(verbose.output, ".spin(I)J") == 25);
}

TEST_CASE("dump of a truncated recording prints what precedes the damage and exits 1") {
    ScratchDir dir;
    const std::string path = dir.file("cut.sfr");
    const auto events = profile_like_events(25);
    write_recording(path, events, 2048);
    const ReadBack intact = read_recording(path);
    REQUIRE(intact.chunk_offsets.size() >= 3);

    // The events the reader delivers before the second half of the file.
    const size_t cut_chunk = intact.chunk_offsets.size() / 2;
    std::vector<Event> before;
    {
        auto reader = RecordingReader::open(path);
        REQUIRE(reader.ok());
        while (auto event = (*reader)->next()) {
            if ((*reader)->offset() >= intact.chunk_offsets[cut_chunk]) break;
            before.push_back(std::move(*event));
        }
    }
    const uint64_t damaged_at = intact.chunk_offsets[cut_chunk];
    REQUIRE(::truncate(path.c_str(), static_cast<off_t>(damaged_at + 50)) == 0);

    const CommandResult json = run_stackfrag("dump --json '" + path + "'");
    CHECK(json.exit_code == 1);
    const nlohmann::json dump = nlohmann::json::parse(json.output);
    REQUIRE(dump.at("damage").is_object());
    CHECK(dump.at("damage").at("offset").get<uint64_t>() == damaged_at);
    CHECK(dump.at("damage").at("reason").get<std::string>().find("truncated at offset " + std::to_string(damaged_at)) !=
          std::string::npos);
    check_counts(dump, count_expected(before));

    const CommandResult text = run_stackfrag("dump '" + path + "'", "2>&1");
    CHECK(text.exit_code == 1);
    CHECK(occurrences(text.output, "at offset " + std::to_string(damaged_at)) >= 1);
}

TEST_CASE("dump of a missing or foreign file names it and exits 2") {
    ScratchDir dir;
    const std::string missing = dir.file("missing.sfr");
    const CommandResult absent = run_stackfrag("dump --json '" + missing + "'", "2>&1");
    CHECK(absent.exit_code == 2);
    CHECK(occurrences(absent.output, missing) >= 1);
    CHECK(occurrences(absent.output, "No such file") == 1);

    const std::string foreign = dir.file("notes.txt");
    write_bytes(foreign, {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', ' ', 't', 'h', 'e', 'r', 'e', '\n'});
    const CommandResult wrong = run_stackfrag("dump '" + foreign + "'", "2>&1");
    CHECK(wrong.exit_code == 2);
    CHECK(occurrences(wrong.output, "not a stackfrag recording") == 1);
}
