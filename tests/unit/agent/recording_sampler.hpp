// A started sampler at 1 ms writing a recording of its own, for the sampler tests.
#pragma once

#include <unistd.h>

#include <memory>
#include <string>

#include "oracle.hpp"
#include "sampler.hpp"
#include "test_recording.hpp"

namespace sf::test {

// A started sampler at 1 ms writing a recording of its own (merging `oracle`'s samples, if given).
struct RecordingSampler {
    explicit RecordingSampler(const std::string& name, agent::OracleSampler* oracle = nullptr)
        : path("/tmp/sf-agent-sampler-" + name + "-" + std::to_string(getpid()) + ".sfr") {
        writer = std::make_unique<agent::StreamWriter>(new_recording(path));
        kernel::SamplingConfig config;
        config.period_ns = 1'000'000;
        sampler = std::make_unique<agent::Sampler>(config, queue, *writer, oracle);
        REQUIRE(sampler->start().ok());
    }
    std::string path;
    agent::EventQueue queue;
    std::unique_ptr<agent::StreamWriter> writer;
    std::unique_ptr<agent::Sampler> sampler;
};

}  // namespace sf::test
