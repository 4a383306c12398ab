#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>

#include "recording_support.hpp"
#include "stackfrag/events/recording.hpp"
#include "test_env.hpp"

using namespace sf;
using namespace sf::test;

namespace {

size_t file_size(const std::string& path) {
    struct stat info {};
    REQUIRE(::stat(path.c_str(), &info) == 0);
    return static_cast<size_t>(info.st_size);
}

void truncate_to(const std::string& path, size_t size) {
    REQUIRE(::truncate(path.c_str(), static_cast<off_t>(size)) == 0);
}

void flip_byte(const std::string& path, size_t at) {
    auto bytes = read_bytes(path);
    REQUIRE(at < bytes.size());
    bytes[at] ^= 0x40;
    write_bytes(path, bytes);
}

using sf::test::contains;

// Small chunks, so that any damage test has several chunks to aim at.
struct DamageFixture {
    ScratchDir dir;
    std::string path = dir.file("damaged.sfr");
    std::vector<Event> events = EventFactory(7).every_kind(12, 3000);
    ReadBack intact;

    std::vector<uint64_t> event_chunks;   // per intact event: the offset of its chunk

    DamageFixture() {
        write_recording(path, events, 8192);
        intact = read_recording(path);
        REQUIRE(intact.chunk_offsets.size() >= 4);
        auto reader = RecordingReader::open(path);
        REQUIRE(reader.ok());
        while ((*reader)->next()) event_chunks.push_back((*reader)->offset());
    }

    // Events that the intact file delivered from chunks before chunk `index`.
    std::vector<Event> events_before_chunk(size_t index) {
        auto reader = RecordingReader::open(path);
        REQUIRE(reader.ok());
        std::vector<Event> before;
        while (auto event = (*reader)->next()) {
            if ((*reader)->offset() >= intact.chunk_offsets[index]) break;
            before.push_back(std::move(*event));
        }
        return before;
    }
    // Events that the intact file delivered from every chunk but chunk `index` (taken before any damage).
    std::vector<Event> events_except_chunk(size_t index) {
        std::vector<Event> kept;
        for (size_t i = 0; i < intact.events.size(); ++i) {
            if (event_chunks[i] != intact.chunk_offsets[index]) kept.push_back(intact.events[i]);
        }
        return kept;
    }
    size_t events_in_chunk(size_t index) { return intact.events.size() - events_except_chunk(index).size(); }
};

}  // namespace

TEST_CASE("every event kind round-trips exactly across many chunks") {
    ScratchDir dir;
    const std::string path = dir.file("all.sfr");
    const auto events = EventFactory(1).every_kind(40, 20000);
    const RecordingHeader header = sample_header();
    write_recording(path, events, 16 * 1024, header);

    const ReadBack back = read_recording(path);
    CHECK_FALSE(back.damage.has_value());
    CHECK(back.header == header);
    CHECK(back.header.version == 1);
    CHECK(back.skipped == 0);
    CHECK(back.chunk_offsets.size() > 10);
    CHECK(std::is_sorted(back.chunk_offsets.begin(), back.chunk_offsets.end()));
    REQUIRE(back.events.size() == events.size());
    for (size_t i = 0; i < events.size(); ++i) {
        INFO("event " << i << " kind " << kind_name(kind_of(events[i])));
        CHECK(back.events[i] == events[i]);
    }
}

TEST_CASE("extreme field values and empty containers round-trip") {
    ScratchDir dir;
    const std::string path = dir.file("extremes.sfr");
    Sample max_sample;
    max_sample.time_ns = UINT64_MAX;
    max_sample.pid = UINT32_MAX;
    max_sample.tid = UINT32_MAX;
    max_sample.source = static_cast<SampleSource>(0xff);   // unknown enum values pass through verbatim
    max_sample.regs = Registers{UINT64_MAX, 0, 1, UINT64_MAX - 1, 2, 3, 4};
    max_sample.stack_sp = UINT64_MAX;
    CodeLoad negative;
    negative.frame_size_words = INT32_MIN;
    negative.osr_bci = INT32_MAX;
    negative.comp_level = -1;
    negative.frames = {MethodBci{0, INT32_MIN}};
    const std::vector<Event> events = {max_sample, negative, Stub{}, MethodInfo{}, VmInfo{}, Oracle{},
                                       ThreadInfo{0, 0, true, std::string("a\0b", 3)}};
    write_recording(path, events, 1 << 20, RecordingHeader{});
    const ReadBack back = read_recording(path);
    CHECK_FALSE(back.damage.has_value());
    CHECK(back.header == RecordingHeader{});
    CHECK(back.events == events);
}

TEST_CASE("full-size samples round-trip through default-sized compressed chunks") {
    ScratchDir dir;
    const std::string path = dir.file("samples.sfr");
    EventFactory factory(3);
    std::vector<Event> events;
    for (int i = 0; i < 300; ++i) events.emplace_back(std::in_place_type<Sample>, factory.sample(16384));
    write_recording(path, events, RecordingWriterOptions{}.chunk_bytes);

    const ReadBack back = read_recording(path);
    CHECK_FALSE(back.damage.has_value());
    CHECK(back.chunk_offsets.size() >= 4);   // 300 × 16 KB over 1 MiB chunks
    CHECK(back.events == events);
    // The stacks are only partly random, so zstd must have shrunk the file.
    CHECK(file_size(path) < 300 * 16384);
}

TEST_CASE("incompressible stacks are stored and still round-trip") {
    ScratchDir dir;
    const std::string path = dir.file("random.sfr");
    std::mt19937_64 random(11);
    std::vector<Event> events;
    for (int i = 0; i < 20; ++i) {
        Sample sample;
        sample.time_ns = static_cast<uint64_t>(i);
        sample.stack.resize(4096);
        for (auto& byte : sample.stack) byte = static_cast<uint8_t>(random());
        events.push_back(std::move(sample));
    }
    write_recording(path, events, 8192);
    const ReadBack back = read_recording(path);
    CHECK_FALSE(back.damage.has_value());
    CHECK(back.events == events);
}

TEST_CASE("bytes_written matches the file and flush makes events readable at once") {
    ScratchDir dir;
    const std::string path = dir.file("flush.sfr");
    auto writer = RecordingWriter::create(path, sample_header());
    REQUIRE(writer.ok());
    const auto events = EventFactory(5).every_kind(2, 500);
    for (const auto& event : events) REQUIRE((*writer)->write(event).ok());
    REQUIRE((*writer)->flush().ok());
    CHECK((*writer)->bytes_written() == file_size(path));
    CHECK(read_recording(path).events == events);   // while the writer is still open

    REQUIRE((*writer)->close().ok());
    CHECK((*writer)->bytes_written() == file_size(path));
    CHECK_FALSE((*writer)->write(events.front()).ok());
    CHECK_FALSE((*writer)->flush().ok());
    CHECK_FALSE((*writer)->close().ok());
}

TEST_CASE("a file that ends exactly at a chunk boundary is not damaged") {
    DamageFixture fixture;
    truncate_to(fixture.path, fixture.intact.chunk_offsets[2]);
    const ReadBack back = read_recording(fixture.path);
    CHECK_FALSE(back.damage.has_value());
    CHECK(back.events == fixture.events_before_chunk(2));
}

TEST_CASE("a file truncated inside a chunk yields the events before it and the chunk's offset") {
    DamageFixture fixture;
    const uint64_t second = fixture.intact.chunk_offsets[1];
    const uint64_t third = fixture.intact.chunk_offsets[2];
    const std::vector<Event> expected = fixture.events_before_chunk(1);
    REQUIRE_FALSE(expected.empty());

    const uint64_t cut = GENERATE_COPY(second + 1, second + 20, (second + third) / 2, third - 1);
    INFO("cut at " << cut);
    truncate_to(fixture.path, cut);
    const ReadBack back = read_recording(fixture.path);
    REQUIRE(back.damage.has_value());
    CHECK(back.damage->offset == second);
    CHECK(back.damage->error.code == Errc::kTruncated);
    CHECK(contains(back.damage->error.message, "truncated at offset " + std::to_string(second)));
    CHECK(back.events == expected);
}

TEST_CASE("a file truncated inside the file header cannot be opened and says where") {
    DamageFixture fixture;
    const size_t cut = GENERATE(0, 5, 12, 30);
    INFO("cut at " << cut);
    truncate_to(fixture.path, cut);
    auto reader = RecordingReader::open(fixture.path);
    REQUIRE_FALSE(reader.ok());
    CHECK(reader.error().code == Errc::kTruncated);
    CHECK(contains(reader.error().message, "truncated at offset 0"));
    CHECK(contains(reader.error().message, fixture.path));
}

TEST_CASE("a flipped byte in a chunk payload is a checksum error at that chunk") {
    DamageFixture fixture;
    const uint64_t third = fixture.intact.chunk_offsets[2];
    flip_byte(fixture.path, third + 44 + 17);
    const ReadBack back = read_recording(fixture.path);
    REQUIRE(back.damage.has_value());
    CHECK(back.damage->offset == third);
    CHECK(back.damage->error.code == Errc::kCorrupt);
    CHECK(contains(back.damage->error.message, "bad chunk payload checksum at offset " + std::to_string(third)));
    // The chunk's header is intact: its length leads to the next chunk, and it says what was lost.
    CHECK(back.events == fixture.events_except_chunk(2));
    REQUIRE(back.damages.size() == 1);
    CHECK(back.damage->resumed_at == fixture.intact.chunk_offsets[3]);
    CHECK(back.damage->lost_bytes == fixture.intact.chunk_offsets[3] - third);
    REQUIRE(back.damage->lost_events.has_value());
    CHECK(*back.damage->lost_events == fixture.events_in_chunk(2));
    CHECK(back.damage->lost_min_time_ns <= back.damage->lost_max_time_ns);
    CHECK(contains(back.damage->describe(), "read on from offset " + std::to_string(fixture.intact.chunk_offsets[3])));
}

TEST_CASE("damage in several chunks loses those chunks only") {
    DamageFixture fixture;
    const auto& chunks = fixture.intact.chunk_offsets;
    flip_byte(fixture.path, chunks[1] + 44 + 5);   // payload
    flip_byte(fixture.path, chunks[3] + 2);        // header magic
    const ReadBack back = read_recording(fixture.path);
    REQUIRE(back.damages.size() == 2);
    CHECK(back.damages[0].offset == chunks[1]);
    CHECK(back.damages[1].offset == chunks[3]);
    CHECK_FALSE(back.damages[1].lost_events.has_value());   // its header is the damaged part
    CHECK(back.damages[1].resumed_at == chunks[4]);
    CHECK(back.events.size() ==
          fixture.intact.events.size() - fixture.events_in_chunk(1) - fixture.events_in_chunk(3));
    CHECK(back.chunk_offsets.front() == chunks[0]);
    CHECK(back.chunk_offsets.back() == chunks.back());
}

TEST_CASE("damage in the last chunk ends the read there") {
    DamageFixture fixture;
    const uint64_t last = fixture.intact.chunk_offsets.back();
    flip_byte(fixture.path, last + 1);
    const ReadBack back = read_recording(fixture.path);
    REQUIRE(back.damages.size() == 1);
    CHECK(back.damage->offset == last);
    CHECK_FALSE(back.damage->resumed_at.has_value());
    CHECK(back.damage->lost_bytes == file_size(fixture.path) - last);
    CHECK(back.events == fixture.events_except_chunk(fixture.intact.chunk_offsets.size() - 1));
}

TEST_CASE("a flipped byte in a chunk header is reported at that chunk") {
    DamageFixture fixture;
    const uint64_t second = fixture.intact.chunk_offsets[1];
    SECTION("in a length field") {
        flip_byte(fixture.path, second + 9);
        const ReadBack back = read_recording(fixture.path);
        REQUIRE(back.damage.has_value());
        CHECK(back.damage->offset == second);
        CHECK(contains(back.damage->error.message, "bad chunk header checksum at offset " + std::to_string(second)));
        // The length is not to be trusted: the next intact header is found by its checksum.
        CHECK(back.damage->resumed_at == fixture.intact.chunk_offsets[2]);
        CHECK_FALSE(back.damage->lost_events.has_value());
        CHECK(back.events == fixture.events_except_chunk(1));
    }
    SECTION("in the magic") {
        flip_byte(fixture.path, second);
        const ReadBack back = read_recording(fixture.path);
        REQUIRE(back.damage.has_value());
        CHECK(back.damage->offset == second);
        CHECK(contains(back.damage->error.message, "bad chunk magic at offset " + std::to_string(second)));
        CHECK(back.damage->resumed_at == fixture.intact.chunk_offsets[2]);
        CHECK(back.events == fixture.events_except_chunk(1));
    }
}

TEST_CASE("a flipped byte in the file header is refused at open") {
    DamageFixture fixture;
    SECTION("magic") {
        flip_byte(fixture.path, 1);
        auto reader = RecordingReader::open(fixture.path);
        REQUIRE_FALSE(reader.ok());
        CHECK(contains(reader.error().message, "not a stackfrag recording"));
    }
    SECTION("a header field") {
        flip_byte(fixture.path, 20);
        auto reader = RecordingReader::open(fixture.path);
        REQUIRE_FALSE(reader.ok());
        CHECK(reader.error().code == Errc::kCorrupt);
        CHECK(contains(reader.error().message, "checksum"));
    }
    SECTION("the version") {
        auto bytes = read_bytes(fixture.path);
        bytes[8] = 2;   // a future version, with a consistent checksum
        const uint32_t body = bytes[12] | bytes[13] << 8 | bytes[14] << 16 | static_cast<uint32_t>(bytes[15]) << 24;
        const uint32_t sum = crc(bytes, 16 + body);
        for (int i = 0; i < 4; ++i) bytes[16 + body + i] = static_cast<uint8_t>(sum >> (8 * i));
        write_bytes(fixture.path, bytes);
        auto reader = RecordingReader::open(fixture.path);
        REQUIRE_FALSE(reader.ok());
        CHECK(reader.error().code == Errc::kUnsupported);
        CHECK(contains(reader.error().message, "version 2"));
    }
}

TEST_CASE("a hand-encoded file per the documented layout reads back, skipping unknown kinds") {
    ScratchDir dir;
    const std::string path = dir.file("hand.sfr");
    const RecordingHeader header = sample_header();
    const ThreadInfo thread{100, 77, false, "worker-1"};
    const Lost lost{200, 77, 12345};

    std::vector<uint8_t> events;
    auto add = [&events](const std::vector<uint8_t>& frame) { events.insert(events.end(), frame.begin(), frame.end()); };
    add(hand_event(200, {1, 2, 3, 4, 5, 6, 7}));   // a kind from the future
    add(hand_event(static_cast<uint8_t>(EventKind::kThread), hand_thread_info(thread)));
    add(hand_event(0, {}));                         // kind 0 is reserved: skipped, too
    // A newer writer appended a field to Lost: this reader keeps the fields it knows.
    auto longer_lost = hand_lost(lost);
    longer_lost.insert(longer_lost.end(), {0xaa, 0xbb, 0xcc});
    add(hand_event(static_cast<uint8_t>(EventKind::kLost), longer_lost));

    auto file = hand_file_header(header);
    const auto chunk = hand_chunk(events, 4, 100, 200);
    file.insert(file.end(), chunk.begin(), chunk.end());
    write_bytes(path, file);

    const ReadBack back = read_recording(path);
    CHECK_FALSE(back.damage.has_value());
    CHECK(back.header == header);
    CHECK(back.skipped == 2);
    REQUIRE(back.events.size() == 2);
    CHECK(back.events[0] == Event{thread});
    CHECK(back.events[1] == Event{lost});
}

TEST_CASE("an event body that does not parse damages its whole chunk") {
    ScratchDir dir;
    const std::string path = dir.file("badbody.sfr");
    const ThreadInfo good{1, 5, false, "main"};

    std::vector<uint8_t> first_chunk_events = hand_event(static_cast<uint8_t>(EventKind::kThread), hand_thread_info(good));
    auto file = hand_file_header(sample_header());
    const auto first = hand_chunk(first_chunk_events, 1, 1, 1);
    file.insert(file.end(), first.begin(), first.end());
    const uint64_t second_offset = file.size();

    std::vector<uint8_t> body;
    std::string expected_reason;
    SECTION("a body shorter than its fields") {
        body = hand_thread_info(good);
        body.resize(10);
        expected_reason = "body ends inside a field";
    }
    SECTION("a string longer than the body") {
        body = hand_thread_info(ThreadInfo{1, 5, false, "main"});
        body[13] = 0xff;   // the name's length
        expected_reason = "exceeds the body";
    }
    SECTION("a boolean that is neither 0 nor 1") {
        body = hand_thread_info(good);
        body[12] = 2;
        expected_reason = "neither 0 nor 1";
    }
    auto second_events = hand_event(static_cast<uint8_t>(EventKind::kThread), hand_thread_info(good));
    const auto bad = hand_event(static_cast<uint8_t>(EventKind::kThread), body);
    second_events.insert(second_events.end(), bad.begin(), bad.end());
    const auto second = hand_chunk(second_events, 2, 1, 1);
    file.insert(file.end(), second.begin(), second.end());
    write_bytes(path, file);

    const ReadBack back = read_recording(path);
    REQUIRE(back.damage.has_value());
    CHECK(back.damage->offset == second_offset);
    CHECK(back.damage->error.code == Errc::kCorrupt);
    CHECK(contains(back.damage->error.message, "bad event at offset " + std::to_string(second_offset)));
    CHECK(contains(back.damage->error.message, expected_reason));
    // The good event before the bad one in the same chunk is not delivered: chunks are atomic.
    REQUIRE(back.events.size() == 1);
    CHECK(back.events[0] == Event{good});
}

TEST_CASE("a chunk whose event count disagrees with its events is damaged") {
    ScratchDir dir;
    const std::string path = dir.file("count.sfr");
    const auto events = hand_event(static_cast<uint8_t>(EventKind::kLost), hand_lost(Lost{1, 2, 3}));
    auto file = hand_file_header(sample_header());
    const uint64_t chunk_offset = file.size();
    const uint32_t count = GENERATE(0u, 2u);
    const auto chunk = hand_chunk(events, count, 1, 1);
    file.insert(file.end(), chunk.begin(), chunk.end());
    write_bytes(path, file);
    const ReadBack back = read_recording(path);
    REQUIRE(back.damage.has_value());
    CHECK(back.damage->offset == chunk_offset);
    CHECK(back.events.empty());
}

TEST_CASE("the writer never replaces a file or follows a symlink") {
    ScratchDir dir;
    const std::string existing = dir.file("existing.sfr");
    write_bytes(existing, {'k', 'e', 'e', 'p'});
    auto over_existing = RecordingWriter::create(existing, sample_header());
    REQUIRE_FALSE(over_existing.ok());
    CHECK(over_existing.error().sys_errno == EEXIST);
    CHECK(read_bytes(existing) == std::vector<uint8_t>{'k', 'e', 'e', 'p'});

    const std::string target = dir.file("target");
    write_bytes(target, {'s', 'a', 'f', 'e'});
    REQUIRE(::chmod(target.c_str(), 0644) == 0);
    const std::string link = dir.file("link.sfr");
    REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
    auto through_link = RecordingWriter::create(link, sample_header());
    REQUIRE_FALSE(through_link.ok());
    CHECK(read_bytes(target) == std::vector<uint8_t>{'s', 'a', 'f', 'e'});
    struct stat info {};
    REQUIRE(::lstat(link.c_str(), &info) == 0);
    CHECK(S_ISLNK(info.st_mode));
    REQUIRE(::stat(target.c_str(), &info) == 0);
    CHECK((info.st_mode & 07777) == 0644);

    // A dangling symlink must not create its target either.
    const std::string dangling = dir.file("dangling.sfr");
    const std::string nowhere = dir.file("nowhere");
    REQUIRE(::symlink(nowhere.c_str(), dangling.c_str()) == 0);
    CHECK_FALSE(RecordingWriter::create(dangling, sample_header()).ok());
    CHECK(::access(nowhere.c_str(), F_OK) != 0);
}

TEST_CASE("recordings are created with mode 0600 whatever the umask") {
    ScratchDir dir;
    const mode_t umask_value = GENERATE(mode_t{0}, mode_t{022}, mode_t{077});
    const mode_t previous = ::umask(umask_value);
    const std::string path = dir.file("mode-" + std::to_string(umask_value) + ".sfr");
    auto writer = RecordingWriter::create(path, sample_header());
    ::umask(previous);
    REQUIRE(writer.ok());
    REQUIRE((*writer)->close().ok());
    struct stat info {};
    REQUIRE(::stat(path.c_str(), &info) == 0);
    CHECK((info.st_mode & 07777) == 0600);
}

TEST_CASE("opening a missing file or a directory fails with the path in the message") {
    ScratchDir dir;
    auto missing = RecordingReader::open(dir.file("absent.sfr"));
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().sys_errno == ENOENT);
    CHECK(contains(missing.error().describe(), dir.file("absent.sfr")));

    auto directory = RecordingReader::open(dir.file(""));
    REQUIRE_FALSE(directory.ok());
    CHECK(directory.error().code == Errc::kIo);
}

// Not part of the normal run: `test_events "[.bench]"` prints the writer's throughput.
TEST_CASE("writer throughput on 16 KB samples", "[.bench]") {
    ScratchDir dir;
    EventFactory factory(9);
    // More distinct samples than a chunk holds, so that no chunk sees a repeat.
    std::vector<Event> samples;
    for (int i = 0; i < 256; ++i) samples.push_back(factory.sample(16384));
    for (int level : {-1, 1, 3}) {
        const std::string path = dir.file("bench-" + std::to_string(level + 10) + ".sfr");
        RecordingWriterOptions options;
        options.compression_level = level;
        auto writer = RecordingWriter::create(path, sample_header(), options);
        REQUIRE(writer.ok());
        const int count = 20000;
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < count; ++i) {
            if (!(*writer)->write(samples[static_cast<size_t>(i) % samples.size()]).ok()) FAIL("write");
        }
        REQUIRE((*writer)->close().ok());
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double raw_mb = count * 16384.0 / 1e6;
        std::printf("level %d: %d samples in %.3f s = %.0f MB/s of stack, %.0f samples/s, ratio %.2f\n", level,
                    count, seconds, raw_mb / seconds, count / seconds, raw_mb * 1e6 / static_cast<double>(file_size(path)));
    }
}

TEST_CASE("any single damaged byte loses exactly its chunk; any cut yields exactly the chunks before it") {
    ScratchDir dir;
    const std::string path = dir.file("sweep.sfr");
    const auto events = EventFactory(13).every_kind(3, 600);
    write_recording(path, events, 2048);
    const ReadBack intact = read_recording(path);
    REQUIRE(intact.events == events);
    REQUIRE(intact.chunk_offsets.size() >= 3);
    const std::vector<uint8_t> original = read_bytes(path);
    const uint64_t first_chunk = intact.chunk_offsets.front();

    // Events delivered from chunks that start before `offset`, and the chunk containing `at`.
    auto chunk_containing = [&](uint64_t at) {
        return *std::prev(std::upper_bound(intact.chunk_offsets.begin(), intact.chunk_offsets.end(), at));
    };
    std::vector<size_t> events_before;   // per chunk index: how many events precede it
    {
        auto reader = RecordingReader::open(path);
        REQUIRE(reader.ok());
        size_t delivered = 0;
        size_t chunk = 0;
        events_before.push_back(0);
        while ((*reader)->next()) {
            if ((*reader)->offset() != intact.chunk_offsets[chunk]) {
                ++chunk;
                events_before.push_back(delivered);
            }
            ++delivered;
        }
        events_before.push_back(delivered);   // "before" the end of the file
    }
    auto index_of = [&](uint64_t chunk_offset) {
        return static_cast<size_t>(std::find(intact.chunk_offsets.begin(), intact.chunk_offsets.end(), chunk_offset) -
                                   intact.chunk_offsets.begin());
    };

    // Every byte flipped in turn (in place and back: rewriting whole files is slow on ext4):
    // CRC-32 catches every single-byte error.
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);
    for (size_t at = 0; at < original.size(); at += 7) {
        const uint8_t flipped = original[at] ^ static_cast<uint8_t>(1 + at % 255);
        REQUIRE(::pwrite(fd, &flipped, 1, static_cast<off_t>(at)) == 1);
        auto reader = RecordingReader::open(path);
        size_t delivered = 0;
        std::optional<RecordingDamage> damage;
        if (reader.ok()) {
            while ((*reader)->next()) ++delivered;
            damage = (*reader)->damage();
        }
        REQUIRE(::pwrite(fd, &original[at], 1, static_cast<off_t>(at)) == 1);
        INFO("flipped byte " << at);
        if (at < first_chunk) {
            CHECK_FALSE(reader.ok());
            continue;
        }
        REQUIRE(reader.ok());
        REQUIRE(damage.has_value());
        CHECK(damage->offset == chunk_containing(at));
        const size_t index = index_of(chunk_containing(at));
        const size_t lost = events_before[index + 1] - events_before[index];
        CHECK(delivered == events.size() - lost);
        if (index + 1 < intact.chunk_offsets.size()) CHECK(damage->resumed_at == intact.chunk_offsets[index + 1]);
        else CHECK_FALSE(damage->resumed_at.has_value());
    }

    // Every cut in turn, from the end backwards so that each cut only shortens the file.
    for (size_t cut = original.size() - 1; cut >= first_chunk; cut -= 5) {
        REQUIRE(::ftruncate(fd, static_cast<off_t>(cut)) == 0);
        auto reader = RecordingReader::open(path);
        REQUIRE(reader.ok());
        size_t delivered = 0;
        while ((*reader)->next()) ++delivered;
        INFO("cut at " << cut);
        const uint64_t chunk = chunk_containing(cut);
        CHECK(delivered == events_before[index_of(chunk)]);
        if (cut == chunk) {
            CHECK_FALSE((*reader)->damage().has_value());
        } else {
            REQUIRE((*reader)->damage().has_value());
            CHECK((*reader)->damage()->offset == chunk);
            CHECK((*reader)->damage()->error.code == Errc::kTruncated);
        }
    }
    ::close(fd);
}
