// Entry points shared by the libFuzzer targets (tests/fuzz/) and the corpus replay test
// (tests/unit/fuzz_corpus/): the same code runs under the fuzzer and in every CTest run, so an
// input that once crashed stays a regression test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sf::fuzz {

// Reads `data` as a recording file, every event to the end or the damage. Aborts when the reader
// breaks one of its documented promises; the sanitizers catch the rest.
int fuzz_recording_one(const uint8_t* data, size_t size);

// Loads the code map the decoder fuzzer decodes against (a recording holding the VM's code events,
// tests/data/fuzz/codemap-jdk17.sfr). Returns an empty string or what went wrong.
std::string fuzz_decoder_init(const std::string& codemap_path);

// Decodes one snapshot built from `data` (layout in fuzz_entry_decoder.cpp) against the code map.
int fuzz_decoder_one(const uint8_t* data, size_t size);

}  // namespace sf::fuzz
