// A fresh recording of this process at `path` (any old file there removed), for the sampler tests.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "stackfrag/events/recording.hpp"

namespace sf::test {

inline std::unique_ptr<RecordingWriter> new_recording(const std::string& path) {
    std::remove(path.c_str());
    RecordingHeader header;
    header.pid = static_cast<uint32_t>(getpid());
    Result<std::unique_ptr<RecordingWriter>> created = RecordingWriter::create(path, header);
    REQUIRE(created.ok());
    return std::move(created).value();
}

}  // namespace sf::test
