// libFuzzer target: arbitrary bytes as a recording file (see fuzz_entry_recording.cpp).
#include <cstddef>
#include <cstdint>

#include "fuzz_entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    return sf::fuzz::fuzz_recording_one(data, size);
}
