// Collapsed stacks ("root;...;leaf COUNT" per line) as the agent and replay write them, split into
// frames, for tests that look at where samples landed.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace sf::test {

struct Stack {
    std::vector<std::string> frames;   // root first
    uint64_t count = 0;
};

inline std::vector<Stack> parse_collapsed(const std::string& text) {
    std::vector<Stack> stacks;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        const size_t space = line.rfind(' ');
        if (space == std::string::npos) continue;
        Stack stack;
        stack.count = std::stoull(line.substr(space + 1));
        std::istringstream frames(line.substr(0, space));
        std::string frame;
        while (std::getline(frames, frame, ';')) stack.frames.push_back(frame);
        stacks.push_back(std::move(stack));
    }
    return stacks;
}

}  // namespace sf::test
