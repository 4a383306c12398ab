// The front-gap vector a thread's journal keeps its steps and frames in (walk_journal.hpp): replacing
// the first elements by more or fewer keeps the rest as they were, in order, against a plain vector
// doing the same with erase and insert.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "walk_journal.hpp"

using sf::detail::FrontGapVector;

namespace {

template <class T>
std::vector<T> contents(const FrontGapVector<T>& v) {
    return std::vector<T>(v.begin(), v.end());
}

}  // namespace

TEST_CASE("FrontGapVector: replacing the front keeps the rest in place and in order", "[walk_journal]") {
    FrontGapVector<std::string> v;
    for (const char* s : {"a", "b", "c", "d"}) v.emplace_back(s);
    v.replace_front(2, 1);   // a b -> X
    v[0] = std::string(1, 'X');
    CHECK(contents(v) == std::vector<std::string>{"X", "c", "d"});
    CHECK(v.front_room() == 1);
    v.replace_front(1, 3);   // X -> P Q R: one slot in front, two more needed
    v[0] = std::string(1, 'P');
    v[1] = std::string(1, 'Q');
    v[2] = std::string(1, 'R');
    CHECK(contents(v) == std::vector<std::string>{"P", "Q", "R", "c", "d"});
    v.replace_front(0, 1);   // the room left in front is used without a move
    const std::string* c_before = &v[4];
    v[0] = std::string(1, 'O');
    v.replace_front(1, 1);
    CHECK(&v[4] == c_before);
    CHECK(contents(v) == std::vector<std::string>{"O", "P", "Q", "R", "c", "d"});
    v.resize(3);
    CHECK(contents(v) == std::vector<std::string>{"O", "P", "Q"});
    v.clear();
    CHECK(v.empty());
    CHECK(v.front_room() == 0);
}

TEST_CASE("FrontGapVector: random front replacements agree with a plain vector", "[walk_journal]") {
    std::mt19937 rng(14);
    FrontGapVector<uint64_t> v;
    std::vector<uint64_t> model;
    uint64_t next = 1;
    size_t largest_buffer = 0, largest_size = 0;
    for (int round = 0; round < 20000; ++round) {
        const unsigned op = rng() % 8;
        if (op == 0 && model.size() < 200) {
            v.emplace_back(next);
            model.push_back(next++);
        } else if (op == 1 && rng() % 50 == 0) {
            v.clear();
            model.clear();
        } else {
            const size_t old_front = model.empty() ? 0 : rng() % (model.size() + 1);
            const size_t new_front = rng() % 24;
            v.replace_front(old_front, new_front);
            model.erase(model.begin(), model.begin() + static_cast<std::ptrdiff_t>(old_front));
            model.insert(model.begin(), new_front, 0);
            for (size_t i = 0; i < new_front; ++i) {
                v[i] = next;
                model[i] = next++;
            }
        }
        REQUIRE(v.size() == model.size());
        REQUIRE(contents(v) == model);
        largest_buffer = std::max(largest_buffer, v.front_room() + v.size());
        largest_size = std::max(largest_size, v.size());
    }
    // The room in front stays bounded: it is given back once it exceeds both 64 elements and the
    // elements held.
    CHECK(largest_buffer <= 2 * largest_size + 64);
}
