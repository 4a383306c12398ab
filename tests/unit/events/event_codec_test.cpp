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
        // One byte short is always an error: every field is needed.
        CHECK(event_codec::decode_body(kind_of(event), body.data(), body.size() - 4, decoded) != nullptr);
    }
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
                CHECK(event_codec::body_size(decoded) <= mutated.size());
            }
        }
    }
    CHECK(rejected > 0);
}
