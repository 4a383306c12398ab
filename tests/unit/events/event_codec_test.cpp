#include <catch2/catch.hpp>
#include <random>

// The codec is internal to sf_events; these tests drive it directly with bytes no writer makes.
#include "../../../events/src/event_codec.hpp"
#include "recording_support.hpp"

using namespace sf;

TEST_CASE("encoded bodies decode to equal events, and trailing bytes are ignored") {
    const auto events = test::EventFactory(17).every_kind(5, 300);
    for (const auto& event : events) {
        std::vector<uint8_t> body(event_codec::body_size(event) + 3, 0xee);
        event_codec::encode_body(event, body.data());
        Event decoded;
        INFO(kind_name(kind_of(event)));
        REQUIRE(event_codec::decode_body(kind_of(event), body.data(), body.size() - 3, decoded) == nullptr);
        CHECK(decoded == event);
        // A newer writer's appended field is skipped.
        REQUIRE(event_codec::decode_body(kind_of(event), body.data(), body.size(), decoded) == nullptr);
        CHECK(decoded == event);
        // Four bytes short is an error: every field is needed (ThreadInfo's last byte is its kind,
        // added later: the body before it is the old layout, tested below).
        if (kind_of(event) != EventKind::kThread) {
            CHECK(event_codec::decode_body(kind_of(event), body.data(), body.size() - 4, decoded) != nullptr);
        }
    }
}

TEST_CASE("a ModuleMap body from before the build id reads with none, from before the image with none; one cut inside either is damage") {
    const ModuleMap libjvm{7, 0x7f0000001000ull, 0x7f0000200000ull, 0x1000, "/usr/lib/jvm/lib/server/libjvm.so",
                           "2f6c7e0e4d9a1b3c5d7e9f0a1b2c3d4e5f607182", {}};
    std::vector<uint8_t> body(event_codec::body_size(libjvm));
    event_codec::encode_body(libjvm, body.data());
    // time_ns, begin, end, file_offset u64, path (u32 length + bytes), build_id (u32 length + bytes),
    // then the image (u32 length + bytes).
    REQUIRE(body.size() == 4 * 8 + 4 + libjvm.path.size() + 4 + libjvm.build_id.size() + 4);
    Event decoded;
    REQUIRE(event_codec::decode_body(EventKind::kModule, body.data(), body.size(), decoded) == nullptr);
    CHECK(std::get<ModuleMap>(decoded) == libjvm);
    const size_t without_image = body.size() - 4;
    REQUIRE(event_codec::decode_body(EventKind::kModule, body.data(), without_image, decoded) == nullptr);
    CHECK(std::get<ModuleMap>(decoded) == libjvm);
    const size_t old_size = without_image - 4 - libjvm.build_id.size();
    REQUIRE(event_codec::decode_body(EventKind::kModule, body.data(), old_size, decoded) == nullptr);
    ModuleMap old = libjvm;
    old.build_id.clear();
    CHECK(std::get<ModuleMap>(decoded) == old);
    CHECK(event_codec::decode_body(EventKind::kModule, body.data(), without_image - 1, decoded) != nullptr);

    // The vDSO carries its bytes.
    const ModuleMap vdso{8, 0x7fff0000e000ull, 0x7fff00010000ull, 0, "[vdso]", "ab", {0x7f, 'E', 'L', 'F', 2, 1}};
    body.assign(event_codec::body_size(vdso), 0);
    event_codec::encode_body(vdso, body.data());
    REQUIRE(event_codec::decode_body(EventKind::kModule, body.data(), body.size(), decoded) == nullptr);
    CHECK(std::get<ModuleMap>(decoded) == vdso);
    CHECK(event_codec::decode_body(EventKind::kModule, body.data(), body.size() - 1, decoded) != nullptr);
}

TEST_CASE("a ThreadInfo body from before the thread kind reads as a Java thread; one cut inside it is damage") {
    const ThreadInfo gc{0x0102030405060708ull, 4321, false, "GC Thread#0", ThreadKind::kGc};
    std::vector<uint8_t> body(event_codec::body_size(gc));
    event_codec::encode_body(gc, body.data());
    // time_ns u64, tid u32, ended bool, name (u32 length + bytes), then kind u8 (kGc is 1).
    REQUIRE(body.size() == 8 + 4 + 1 + 4 + gc.name.size() + 1);
    CHECK(body.back() == 1);
    Event decoded;
    REQUIRE(event_codec::decode_body(EventKind::kThread, body.data(), body.size(), decoded) == nullptr);
    CHECK(std::get<ThreadInfo>(decoded) == gc);
    // The old layout: everything but the kind.
    REQUIRE(event_codec::decode_body(EventKind::kThread, body.data(), body.size() - 1, decoded) == nullptr);
    ThreadInfo old = gc;
    old.kind = ThreadKind::kJava;
    CHECK(std::get<ThreadInfo>(decoded) == old);
    // Cut inside the name: damage, as before.
    CHECK(event_codec::decode_body(EventKind::kThread, body.data(), body.size() - 2, decoded) != nullptr);
}

TEST_CASE("ProcessCpu bodies from before the host's times or at_start read with their defaults; cuts inside are damage") {
    ProcessCpu start{0x0102030405060708ull, 61'000'000, 9'000'000, true};
    start.host_busy_ns = 4'000'000'000;
    start.host_steal_ns = 120'000'000;
    std::vector<uint8_t> body(event_codec::body_size(start));
    event_codec::encode_body(start, body.data());
    // time_ns, user_ns, system_ns u64, at_start bool, then host_busy_ns, host_steal_ns u64.
    REQUIRE(body.size() == 3 * 8 + 1 + 2 * 8);
    CHECK(body[3 * 8] == 1);
    Event decoded;
    REQUIRE(event_codec::decode_body(EventKind::kProcessCpu, body.data(), body.size(), decoded) == nullptr);
    CHECK(std::get<ProcessCpu>(decoded) == start);
    // The layout before the host's times.
    REQUIRE(event_codec::decode_body(EventKind::kProcessCpu, body.data(), body.size() - 16, decoded) == nullptr);
    ProcessCpu old = start;
    old.host_busy_ns = old.host_steal_ns = 0;
    CHECK(std::get<ProcessCpu>(decoded) == old);
    // The layout before at_start.
    REQUIRE(event_codec::decode_body(EventKind::kProcessCpu, body.data(), body.size() - 17, decoded) == nullptr);
    old.at_start = false;
    CHECK(std::get<ProcessCpu>(decoded) == old);
    CHECK(event_codec::decode_body(EventKind::kProcessCpu, body.data(), body.size() - 1, decoded) != nullptr);
    CHECK(event_codec::decode_body(EventKind::kProcessCpu, body.data(), body.size() - 9, decoded) != nullptr);
    CHECK(event_codec::decode_body(EventKind::kProcessCpu, body.data(), body.size() - 18, decoded) != nullptr);
}

TEST_CASE("mutated and random bodies never crash the decoder nor make it read past the body") {
    std::mt19937_64 random(23);
    const auto events = test::EventFactory(19).every_kind(20, 200);
    size_t rejected = 0;
    for (const auto& event : events) {
        std::vector<uint8_t> body(event_codec::body_size(event));
        event_codec::encode_body(event, body.data());
        for (int round = 0; round < 20; ++round) {
            std::vector<uint8_t> mutated = body;
            for (int flips = 0; flips < 3 && !mutated.empty(); ++flips) {
                mutated[random() % mutated.size()] = static_cast<uint8_t>(random());
            }
            mutated.resize(random() % (mutated.size() + 1));
            // An exactly-sized heap copy lets AddressSanitizer see any read past the end.
            auto exact = std::make_unique<uint8_t[]>(mutated.size() + 1);
            std::copy(mutated.begin(), mutated.end(), exact.get());
            Event decoded;
            const char* failure = event_codec::decode_body(kind_of(event), exact.get(), mutated.size(), decoded);
            if (failure != nullptr) {
                ++rejected;
            } else {
                // A ThreadInfo cut right before its kind, a ModuleMap right before its build id or
                // its image, a ProcessCpu before at_start or its host times, is an old layout:
                // re-encoded, it has the kind's byte, the empty string's and image's lengths,
                // at_start's byte and the two times; a VmInfo before max_frames, its four bytes.
                const size_t later = kind_of(event) == EventKind::kThread       ? 1
                                     : kind_of(event) == EventKind::kVmInfo     ? 4
                                     : kind_of(event) == EventKind::kProcessCpu ? 17
                                     : kind_of(event) == EventKind::kModule     ? 8
                                                                                : 0;
                CHECK(event_codec::body_size(decoded) <= mutated.size() + later);
            }
        }
    }
    CHECK(rejected > 0);
}

TEST_CASE("a JvmtiTrace body is laid out as docs/recording-format.md says (kind 11)") {
    const JvmtiTrace trace{0x0102030405060708ull, 4321, true, {MethodBci{0x1122334455667788ull, 7}, MethodBci{9, -1}}};
    const Event event = trace;
    CHECK(kind_of(event) == EventKind::kJvmtiTrace);
    CHECK(static_cast<int>(kind_of(event)) == 11);
    CHECK(std::string(kind_name(EventKind::kJvmtiTrace)) == "jvmti_trace");
    CHECK(time_of(event) == trace.time_ns);
    // time_ns u64, tid u32, truncated bool, frames: u32 count, then {method_id u64, bci i32} each.
    const std::vector<uint8_t> expected = {
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,   // time_ns
        0xe1, 0x10, 0x00, 0x00,                           // tid 4321
        0x01,                                             // truncated
        0x02, 0x00, 0x00, 0x00,                           // two frames
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x07, 0x00, 0x00, 0x00,
        0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
    };
    REQUIRE(event_codec::body_size(event) == expected.size());
    std::vector<uint8_t> body(expected.size());
    event_codec::encode_body(event, body.data());
    CHECK(body == expected);
    Event decoded;
    REQUIRE(event_codec::decode_body(EventKind::kJvmtiTrace, expected.data(), expected.size(), decoded) == nullptr);
    CHECK(decoded == event);
    CHECK(event_codec::is_known_kind(11));
}
