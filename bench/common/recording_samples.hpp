// What the decoder benchmarks start from: a recording's events applied to one CodeMap and its samples
// (oracle samples included) kept aside, so that decoding alone is timed, not reading the file.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include <fmt/core.h>

#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/events/recording.hpp"

namespace sf::bench {

// Samples are decoded after all events are applied: the CodeMap's time rules give each sample the
// code valid at its time, as in a live decode. False (with the reason on stderr) if unreadable.
inline bool load_recording_samples(const std::string& path, CodeMap& map, std::vector<Sample>& samples) {
    auto reader = RecordingReader::open(path);
    if (!reader) {
        fmt::print(stderr, "{}\n", reader.error().describe());
        return false;
    }
    while (auto e = (*reader)->next()) {
        if (auto* s = std::get_if<Sample>(&*e)) samples.push_back(std::move(*s));
        else if (auto* o = std::get_if<Oracle>(&*e)) samples.push_back(std::move(o->sample));
        else map.apply(*e);
    }
    return true;
}

}  // namespace sf::bench
