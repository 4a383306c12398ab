// A real recording with bytes flipped in its middle: `replay`, `dump` and `report` skip only the
// damaged chunks, read on after them, and say what was lost; no sample decodes to a stack the intact
// recording did not have; samples that needed the lost code or method events fail with lost_events.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "shell.hpp"
#include "stackfrag/events/recording.hpp"

using namespace sf;

namespace {

const std::string kRecording = STACKFRAG_SOURCE_DIR "/tests/data/groundtruth-jdk17-validate.sfr";

struct ScratchCopy {
    std::string dir;
    std::string path;
    ScratchCopy() {
        char name[] = "/tmp/sf-damaged.XXXXXX";
        REQUIRE(::mkdtemp(name) != nullptr);
        dir = name;
        path = dir + "/damaged.sfr";
        REQUIRE(sf::test::run_shell("cp " + kRecording + " " + path).exit_code == 0);
    }
    ~ScratchCopy() { (void)std::system(("rm -rf " + dir).c_str()); }
    std::string file(const std::string& name) const { return dir + "/" + name; }
};

sf::test::CommandResult stackfrag(const std::string& arguments) {
    return sf::test::run_shell(STACKFRAG_BINARY_DIR "/bin/stackfrag " + arguments);
}

// Per chunk offset of the intact recording: its Sample events (the profile's, not the oracle's).
std::map<uint64_t, uint64_t> samples_per_chunk(const std::string& path) {
    auto reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    std::map<uint64_t, uint64_t> per_chunk;
    while (auto event = (*reader)->next()) {
        per_chunk[(*reader)->offset()] += std::holds_alternative<Sample>(*event) ? 1 : 0;
    }
    REQUIRE_FALSE((*reader)->damage().has_value());
    return per_chunk;
}

// Collapsed stacks -> counts; with `java_only`, each stack keeps only its Java frames (those with
// a "_[j]", "_[i]" or "_[0]" suffix).
std::map<std::string, uint64_t> collapsed_counts(const std::string& path, bool java_only = false) {
    std::ifstream in(path);
    std::map<std::string, uint64_t> counts;
    std::string line;
    while (std::getline(in, line)) {
        const size_t space = line.rfind(' ');
        if (space == std::string::npos) continue;
        std::string stack = line.substr(0, space);
        if (java_only) {
            // A failed walk's top frames, under its marker, are what it found before it stopped:
            // not a decoded stack to compare.
            if (stack.starts_with("[failed: ")) continue;
            std::string kept, frame;
            std::istringstream frames(stack);
            while (std::getline(frames, frame, ';')) {
                if (frame.ends_with("_[j]") || frame.ends_with("_[i]") || frame.ends_with("_[0]")) kept += frame + ";";
            }
            stack = kept;
        }
        counts[stack] += std::stoull(line.substr(space + 1));
    }
    return counts;
}

uint64_t total(const std::map<std::string, uint64_t>& counts) {
    uint64_t sum = 0;
    for (const auto& [stack, n] : counts) sum += n;
    return sum;
}

void flip(const std::string& path, const std::vector<uint64_t>& offsets) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);
    for (uint64_t at : offsets) {
        uint8_t byte = 0;
        REQUIRE(::pread(fd, &byte, 1, static_cast<off_t>(at)) == 1);
        byte ^= 0x5a;
        REQUIRE(::pwrite(fd, &byte, 1, static_cast<off_t>(at)) == 1);
    }
    ::close(fd);
}

// Damages the first chunk of `copy` (kRecording's): it holds the VM's description and the code
// announced at start, so the samples after it fail with lost_events.
void lose_first_chunk(const ScratchCopy& copy) {
    const std::map<uint64_t, uint64_t> chunks = samples_per_chunk(kRecording);
    flip(copy.path, {chunks.begin()->first + 44 + 100});
}

}  // namespace

TEST_CASE("replay, dump and report of a recording with bytes flipped in the middle lose only the damaged chunks") {
    const std::map<uint64_t, uint64_t> chunks = samples_per_chunk(kRecording);
    REQUIRE(chunks.size() >= 6);
    uint64_t all_samples = 0;
    for (const auto& [offset, n] : chunks) all_samples += n;

    ScratchCopy copy;
    const uint64_t size = std::ifstream(kRecording, std::ios::binary | std::ios::ate).tellg();
    // 20 bytes at random in the middle fifth of the file: a few chunks' payloads or headers.
    std::vector<uint64_t> offsets;
    std::mt19937_64 random(GENERATE(1u, 2u, 3u));
    for (int i = 0; i < 20; ++i) offsets.push_back(size * 2 / 5 + random() % (size / 5));
    flip(copy.path, offsets);
    INFO("flipped bytes in [" << size * 2 / 5 << ", " << size * 3 / 5 << ")");

    const std::string intact_collapsed = copy.file("intact.collapsed");
    const auto intact = stackfrag("replay --json --collapsed " + intact_collapsed + " " + kRecording + " 2>/dev/null");
    REQUIRE(intact.exit_code == 0);
    const nlohmann::json intact_json = nlohmann::json::parse(intact.output);

    const std::string damaged_collapsed = copy.file("damaged.collapsed");
    const auto damaged = stackfrag("replay --json --collapsed " + damaged_collapsed + " " + copy.path + " 2>/dev/null");
    CHECK(damaged.exit_code == 1);
    const nlohmann::json replay = nlohmann::json::parse(damaged.output);
    REQUIRE(replay.contains("damages"));
    const auto& damages = replay.at("damages");
    REQUIRE(damages.size() >= 1);

    // The chunks a damaged region covers are lost; every other chunk is read.
    uint64_t lost_samples = 0;
    std::set<uint64_t> lost_chunks;
    for (const auto& d : damages) {
        const uint64_t from = d.at("offset").get<uint64_t>();
        REQUIRE(chunks.count(from) == 1);
        REQUIRE_FALSE(d.at("resumed_at").is_null());   // the damage is in the middle: reading went on
        const uint64_t to = d.at("resumed_at").get<uint64_t>();
        CHECK(d.at("lost_bytes").get<uint64_t>() == to - from);
        for (auto it = chunks.lower_bound(from); it != chunks.end() && it->first < to; ++it) {
            lost_chunks.insert(it->first);
            lost_samples += it->second;
        }
    }
    CHECK(lost_chunks.size() < chunks.size() / 2);
    CHECK(replay.at("perf_samples").get<uint64_t>() == all_samples - lost_samples);
    CHECK(replay.at("perf_samples").get<uint64_t>() > all_samples / 2);

    // No sample decodes to Java frames the intact recording lacks, nor more often than there. (A
    // stub announced in a lost chunk inside a blob announced elsewhere, e.g. libmSin inside
    // "StubRoutines (1)", is named after the blob: its name is coarser, the walk the same.)
    const auto before = collapsed_counts(intact_collapsed, true);
    const auto after = collapsed_counts(damaged_collapsed, true);
    for (const auto& [stack, n] : after) {
        INFO(stack);
        REQUIRE(before.count(stack) == 1);
        CHECK(n <= before.at(stack));
    }
    // Ordinary failure reasons do not grow: what needed lost events says so.
    for (const auto& [reason, n] : replay.at("failed").items()) {
        if (reason == "lost_events") continue;
        INFO(reason);
        const uint64_t had = intact_json.at("failed").contains(reason) ? intact_json.at("failed").at(reason).get<uint64_t>() : 0;
        CHECK(n.get<uint64_t>() <= had);
    }

    // dump reads on too and lists the same regions.
    const auto dump = stackfrag("dump --json " + copy.path + " 2>/dev/null");
    CHECK(dump.exit_code == 1);
    const nlohmann::json dumped = nlohmann::json::parse(dump.output);
    REQUIRE(dumped.at("damages").size() == damages.size());
    for (size_t i = 0; i < damages.size(); ++i) {
        CHECK(dumped.at("damages").at(i).at("offset") == damages.at(i).at("offset"));
        CHECK(dumped.at("damages").at(i).at("resumed_at") == damages.at(i).at("resumed_at"));
    }

    // report writes the same profile as replay's, and says what was lost.
    const std::string reported = copy.file("report.collapsed");
    const auto report = stackfrag("report " + copy.path + " -o " + reported + " 2>&1");
    INFO(report.output);
    CHECK(report.exit_code == 0);
    CHECK(report.output.find("is damaged") != std::string::npos);
    CHECK(report.output.find("read on from offset") != std::string::npos);
    CHECK(total(collapsed_counts(reported)) == total(collapsed_counts(damaged_collapsed)));
}

TEST_CASE("samples that needed the events of a lost first chunk fail with lost_events") {
    ScratchCopy copy;
    lose_first_chunk(copy);
    const auto damaged = stackfrag("replay --json " + copy.path + " 2>/dev/null");
    CHECK(damaged.exit_code == 1);
    const nlohmann::json replay = nlohmann::json::parse(damaged.output);
    const auto& failed = replay.at("failed");
    INFO(failed.dump());
    REQUIRE(failed.contains("lost_events"));
    CHECK(failed.at("lost_events").get<uint64_t>() > 0);
    CHECK_FALSE(failed.contains("no_code_map"));   // wanting the lost VmInfo is lost_events too
    CHECK(replay.at("damages").at(0).at("lost_events").get<uint64_t>() > 0);
}

TEST_CASE("replay --show-failures prints up to N failed samples per reason, with their registers") {
    ScratchCopy copy;
    lose_first_chunk(copy);   // samples fail with lost_events
    const auto shown = stackfrag("replay --show-failures 2 " + copy.path + " 2>/dev/null");
    INFO(shown.output);
    std::map<std::string, int> per_reason;
    std::istringstream lines(shown.output);
    for (std::string line; std::getline(lines, line);) {
        if (!line.starts_with("[failed ")) continue;
        ++per_reason[line.substr(8, line.find(']') - 8)];
        CHECK(line.find(" ip=0x") != std::string::npos);
        CHECK(line.find(" fragment ") != std::string::npos);
    }
    CHECK(per_reason["lost_events"] == 2);
    for (const auto& [reason, n] : per_reason) CHECK(n <= 2);
    const auto quiet = stackfrag("replay " + copy.path + " 2>/dev/null");
    CHECK(quiet.output.find("[failed ") == std::string::npos);
}

TEST_CASE("replay --show-words adds each failed sample's first words from sp, with what they point into") {
    ScratchCopy copy;
    lose_first_chunk(copy);   // samples fail with lost_events
    const auto shown = stackfrag("replay --show-failures 1 --show-words 4 " + copy.path + " 2>/dev/null");
    INFO(shown.output);
    std::istringstream lines(shown.output);
    int failures = 0, words = 0;
    std::string last_word;
    for (std::string line; std::getline(lines, line);) {
        if (line.starts_with("[failed ")) ++failures;
        if (line.starts_with("      sp+0x")) {
            ++words;
            last_word = line;
        }
    }
    REQUIRE(failures >= 1);
    // Four words a failure, unless a fragment holds fewer: sp+0x0 .. sp+0x18, each a 16-digit value.
    CHECK(words <= 4 * failures);
    CHECK(words >= 1);
    CHECK(std::regex_search(last_word, std::regex("^      sp\\+0x[0-9a-f]+ +0x[0-9a-f]{16}")));
    const auto without = stackfrag("replay --show-failures 1 " + copy.path + " 2>/dev/null");
    CHECK(without.output.find("      sp+0x") == std::string::npos);
}
