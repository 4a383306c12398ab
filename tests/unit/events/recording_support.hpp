// Helpers for the recording tests: deterministic events of every kind, and a
// hand encoder that follows docs/recording-format.md byte by byte, independently of the writer.
#pragma once

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "stackfrag/events/events.hpp"
#include "stackfrag/events/recording.hpp"
#include "test_env.hpp"

namespace sf::test {

inline std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Events with every field set to something other than its default, from a fixed seed.
class EventFactory {
public:
    explicit EventFactory(uint64_t seed) : random_(seed) {}

    uint64_t u64() { return random_(); }
    uint32_t u32() { return static_cast<uint32_t>(random_()); }
    int32_t i32() { return static_cast<int32_t>(random_()); }
    std::string text(size_t max_length) {
        std::string out(random_() % (max_length + 1), '\0');
        // Any byte, including NUL and non-UTF-8: strings are length-prefixed bytes.
        for (auto& c : out) c = static_cast<char>(random_());
        return out;
    }

    // Stack words that look like a real fragment: pointers, small integers and zeros.
    std::vector<uint8_t> stack(size_t bytes) {
        std::vector<uint8_t> out(bytes);
        for (size_t at = 0; at + 8 <= bytes; at += 8) {
            uint64_t word = 0;
            switch (random_() % 4) {
                case 0: word = 0x00007f0000000000ull | (random_() & 0xffffff8ull); break;
                case 1: word = random_() % 4096; break;
                case 2: word = 0; break;
                default: word = random_(); break;
            }
            std::memcpy(out.data() + at, &word, 8);
        }
        for (size_t at = bytes & ~size_t{7}; at < bytes; ++at) out[at] = static_cast<uint8_t>(random_());
        return out;
    }

    Sample sample(size_t stack_bytes) {
        Sample s;
        s.time_ns = u64();
        s.pid = u32();
        s.tid = 1000 + u32() % 8;
        s.source = (random_() & 1) ? SampleSource::kPerf : SampleSource::kSignal;
        s.regs = Registers{u64(), u64(), u64(), u64(), u64(), u64(), u64()};
        s.stack_sp = u64();
        s.stack = stack(stack_bytes);
        return s;
    }

    std::vector<MethodBci> frames(size_t max_count) {
        std::vector<MethodBci> out(random_() % (max_count + 1));
        for (auto& f : out) f = MethodBci{u64(), i32()};
        return out;
    }

    CodeLoad code_load() {
        CodeLoad c;
        c.time_ns = u64();
        c.method_id = u64();
        c.code_begin = u64();
        c.code_end = c.code_begin + u32() % 100000;
        c.entry = u64();
        c.verified_entry = u64();
        c.frame_size_words = i32();
        c.frame_complete_offset = i32();
        c.comp_level = i32();
        c.kind = static_cast<CodeKind>(1 + random_() % 4);
        c.osr_bci = i32();
        c.deopt_handler = u64();
        c.orig_pc_offset = i32();
        c.scopes.resize(random_() % 40);
        for (auto& p : c.scopes) p = PcScope{u32(), u32(), u32()};
        c.frames = frames(40);
        c.code.resize(random_() % 300);
        for (auto& byte : c.code) byte = static_cast<uint8_t>(random_());
        return c;
    }

    MethodInfo method() {
        MethodInfo m;
        m.time_ns = u64();
        m.method_id = u64();
        m.method_ptr = u64();
        m.bytecode_begin = u64();
        m.bytecode_size = u32();
        m.access_flags = u32();
        m.class_name = text(40);
        m.name = text(20);
        m.signature = text(30);
        m.source_file = text(20);
        m.lines.resize(random_() % 30);
        for (auto& l : m.lines) l = LineEntry{i32(), i32()};
        return m;
    }

    VmInfo vm_info() {
        VmInfo v;
        v.time_ns = u64();
        v.pid = u32();
        v.jdk_major = i32();
        v.vm_version = text(60);
        v.layout = VmLayout::kJdk17;
        v.call_stub_return = u64();
        v.interpreter_begin = u64();
        v.interpreter_end = u64();
        v.entry_codelets.resize(1 + random_() % 10);
        for (auto& r : v.entry_codelets) r = CodeRange{u64(), u64(), text(30)};
        v.code_cache_low = u64();
        v.code_cache_high = u64();
        v.continuation_return_pc = u64();
        v.sample_stack_bytes = u32();
        v.sample_period_ns = u64();
        v.max_frames = u32();
        return v;
    }

    // Every kind, `rounds` times over, samples with stacks of up to `max_stack` bytes.
    std::vector<Event> every_kind(int rounds, size_t max_stack) {
        std::vector<Event> out;
        for (int round = 0; round < rounds; ++round) {
            out.push_back(vm_info());
            out.push_back(sample(random_() % (max_stack + 1)));
            out.push_back(code_load());
            out.push_back(CodeUnload{u64(), u64(), u64()});
            out.push_back(Stub{u64(), text(50), u64(), u64(), i32()});
            out.push_back(method());
            Oracle oracle;
            oracle.sample = sample(random_() % (max_stack + 1));
            oracle.agct_status = i32();
            oracle.frames = frames(64);
            out.push_back(std::move(oracle));
            out.push_back(ThreadInfo{u64(), u32(), (random_() & 1) != 0, text(30), static_cast<ThreadKind>(random_() % 5)});
            out.push_back(Lost{u64(), u32(), u64()});
            ModuleMap module{u64(), u64(), u64(), u64(), text(80), text(40), {}};
            if ((module.begin & 3) == 0) module.image.assign(module.path.begin(), module.path.end());   // no draws of its own
            out.push_back(std::move(module));
            out.push_back(JvmtiTrace{u64(), u32(), (random_() & 1) != 0, frames(64)});
            ProcessCpu cpu{u64(), u64(), u64()};
            cpu.at_start = (cpu.user_ns & 1) != 0;   // no draws of their own: the sequence stays as it was
            cpu.host_busy_ns = cpu.time_ns ^ cpu.user_ns;
            cpu.host_steal_ns = cpu.system_ns >> 3;
            out.push_back(cpu);
            MethodBatch batch{u64(), {}};
            batch.methods.resize(random_() % 20);
            for (auto& m : batch.methods) m = MethodEntry{u64(), u64(), u64(), u32(), u32()};
            out.push_back(std::move(batch));
            const MethodInfo info = method();
            out.push_back(NamedMethod{info.time_ns, info.method_id, (info.access_flags & 1) != 0, info.class_name,
                                      info.name, info.signature, info.source_file, info.lines});
        }
        return out;
    }

private:
    std::mt19937_64 random_;
};

inline RecordingHeader sample_header() {
    RecordingHeader header;
    header.pid = 4242;
    header.created_unix_ns = 1'700'000'000'123'456'789ull;
    header.created_monotonic_ns = 987'654'321'000ull;
    header.producer = "stackfrag-test 0.1";
    header.command_line = "java -XX:+UseParallelGC -jar app.jar --flag=\"quoted value\"";
    return header;
}

// Writes `events` to a new file at `path`; fails the test on any error.
inline void write_recording(const std::string& path, const std::vector<Event>& events, size_t chunk_bytes,
                            const RecordingHeader& header = sample_header()) {
    RecordingWriterOptions options;
    options.chunk_bytes = chunk_bytes;
    auto writer = RecordingWriter::create(path, header, options);
    REQUIRE(writer.ok());
    for (const auto& event : events) REQUIRE((*writer)->write(event).ok());
    REQUIRE((*writer)->close().ok());
    CHECK((*writer)->events_written() == events.size());
}

struct ReadBack {
    std::vector<Event> events;
    std::vector<uint64_t> chunk_offsets;   // distinct offset() values, in file order
    std::optional<RecordingDamage> damage;
    std::vector<RecordingDamage> damages;
    RecordingHeader header;
    uint64_t skipped = 0;
};

inline ReadBack read_recording(const std::string& path) {
    auto reader = RecordingReader::open(path);
    if (!reader.ok()) FAIL("open " << path << ": " << reader.error().describe());
    ReadBack back;
    back.header = (*reader)->header();
    while (auto event = (*reader)->next()) {
        back.events.push_back(std::move(*event));
        if (back.chunk_offsets.empty() || back.chunk_offsets.back() != (*reader)->offset()) {
            back.chunk_offsets.push_back((*reader)->offset());
        }
    }
    back.damage = (*reader)->damage();
    back.damages = (*reader)->damages();
    back.skipped = (*reader)->skipped_events();
    // Once stopped, a reader stays stopped.
    CHECK_FALSE((*reader)->next().has_value());
    return back;
}

// Hand encoding per docs/recording-format.md.
class ByteWriter {
public:
    template <class T>
    ByteWriter& le(T value) {
        for (size_t i = 0; i < sizeof(T); ++i) bytes.push_back(static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i)));
        return *this;
    }
    ByteWriter& str(const std::string& text) {
        le<uint32_t>(static_cast<uint32_t>(text.size()));
        bytes.insert(bytes.end(), text.begin(), text.end());
        return *this;
    }
    ByteWriter& raw(const std::vector<uint8_t>& more) {
        bytes.insert(bytes.end(), more.begin(), more.end());
        return *this;
    }
    std::vector<uint8_t> bytes;
};

inline uint32_t crc(const std::vector<uint8_t>& bytes, size_t count) {
    return static_cast<uint32_t>(::crc32(0, bytes.data(), static_cast<uInt>(count)));
}

inline std::vector<uint8_t> hand_file_header(const RecordingHeader& header) {
    ByteWriter body;
    body.le<uint32_t>(header.pid).le<uint64_t>(header.created_unix_ns).le<uint64_t>(header.created_monotonic_ns);
    body.str(header.producer).str(header.command_line);
    ByteWriter file;
    file.raw({0x89, 'S', 'F', 'R', '\r', '\n', 0x1a, '\n'}).le<uint32_t>(1).le<uint32_t>(
        static_cast<uint32_t>(body.bytes.size()));
    file.raw(body.bytes);
    file.le<uint32_t>(crc(file.bytes, file.bytes.size()));
    return file.bytes;
}

inline std::vector<uint8_t> hand_event(uint8_t kind, const std::vector<uint8_t>& body) {
    ByteWriter frame;
    frame.le<uint8_t>(kind).le<uint32_t>(static_cast<uint32_t>(body.size())).raw(body);
    return frame.bytes;
}

inline std::vector<uint8_t> hand_chunk(const std::vector<uint8_t>& events, uint32_t event_count, uint64_t min_time,
                                       uint64_t max_time) {
    std::vector<uint8_t> payload(ZSTD_compressBound(events.size()));
    const size_t size = ZSTD_compress(payload.data(), payload.size(), events.data(), events.size(), 3);
    if (ZSTD_isError(size)) throw std::runtime_error("zstd failed");
    payload.resize(size);
    ByteWriter chunk;
    chunk.raw({'S', 'F', 'C', 'K'}).le<uint8_t>(1).le<uint8_t>(0).le<uint8_t>(0).le<uint8_t>(0);
    chunk.le<uint32_t>(static_cast<uint32_t>(payload.size())).le<uint32_t>(static_cast<uint32_t>(events.size()));
    chunk.le<uint32_t>(event_count).le<uint32_t>(crc(payload, payload.size()));
    chunk.le<uint64_t>(min_time).le<uint64_t>(max_time);
    chunk.le<uint32_t>(crc(chunk.bytes, chunk.bytes.size()));
    chunk.raw(payload);
    return chunk.bytes;
}

inline std::vector<uint8_t> hand_thread_info(const ThreadInfo& thread) {
    ByteWriter body;
    body.le<uint64_t>(thread.time_ns).le<uint32_t>(thread.tid).le<uint8_t>(thread.ended ? 1 : 0).str(thread.name);
    return body.bytes;
}

inline std::vector<uint8_t> hand_lost(const Lost& lost) {
    ByteWriter body;
    body.le<uint64_t>(lost.time_ns).le<uint32_t>(lost.tid).le<uint64_t>(lost.count);
    return body.bytes;
}

}  // namespace sf::test
