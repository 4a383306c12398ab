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

inline uint64_t total(const std::vector<Stack>& stacks) {
    uint64_t sum = 0;
    for (const Stack& s : stacks) sum += s.count;
    return sum;
}

// Samples with a frame containing `method` anywhere on the stack.
inline uint64_t containing(const std::vector<Stack>& stacks, const std::string& method) {
    uint64_t sum = 0;
    for (const Stack& s : stacks) {
        for (const std::string& f : s.frames) {
            if (f.find(method) != std::string::npos) {
                sum += s.count;
                break;
            }
        }
    }
    return sum;
}

}  // namespace sf::test
