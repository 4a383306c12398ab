// libFuzzer target: arbitrary registers and fragment bytes against a real JDK 17 code map (see
// fuzz_entry_decoder.cpp). STACKFRAG_FUZZ_CODEMAP overrides the compiled-in code map path.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_entry.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* override_path = std::getenv("STACKFRAG_FUZZ_CODEMAP");
    const std::string path = override_path != nullptr ? override_path : STACKFRAG_FUZZ_CODEMAP;
    if (std::string failure = sf::fuzz::fuzz_decoder_init(path); !failure.empty()) {
        std::fprintf(stderr, "fuzz_decoder: cannot load the code map: %s\n", failure.c_str());
        std::exit(2);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    return sf::fuzz::fuzz_decoder_one(data, size);
}
