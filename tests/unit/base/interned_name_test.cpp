#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "stackfrag/base/interned_name.hpp"

using namespace sf;

TEST_CASE("InternedName: equal names are one key, different names differ, \"\" is no name") {
    const std::string built = std::string("JavaThread::") + "run()";
    const InternedName a("JavaThread::run()");
    const InternedName b(built);
    const InternedName c(std::string_view("JavaThread::run()x").substr(0, 17));
    CHECK(a == b);
    CHECK(a == c);
    CHECK(a.key() == b.key());
    CHECK(a.str() == "JavaThread::run()");
    CHECK(a.str().data() != built.data());   // a copy owned by the pool, not the caller's bytes
    CHECK_FALSE(a == InternedName("JavaThread::run"));
    CHECK(InternedName("").empty());
    CHECK(InternedName() == InternedName(""));
    CHECK(InternedName().str().empty());
    InternedName d = a;
    d.clear();
    CHECK(d.empty());
    CHECK(std::hash<InternedName>{}(a) == std::hash<InternedName>{}(b));
}

TEST_CASE("InternedName: threads interning the same names concurrently get the same keys") {
    constexpr int kNames = 2000;
    std::vector<std::vector<const std::string*>> keys(4, std::vector<const std::string*>(kNames));
    std::vector<std::thread> threads;
    for (size_t t = 0; t < keys.size(); ++t) {
        threads.emplace_back([&keys, t] {
            for (int i = 0; i < kNames; ++i) {
                const int n = t % 2 == 0 ? i : kNames - 1 - i;   // opposite orders: races on first insertion
                keys[t][static_cast<size_t>(n)] = InternedName("concurrent::name" + std::to_string(n)).key();
            }
        });
    }
    for (std::thread& thread : threads) thread.join();
    for (int i = 0; i < kNames; ++i) {
        for (size_t t = 1; t < keys.size(); ++t) REQUIRE(keys[t][static_cast<size_t>(i)] == keys[0][static_cast<size_t>(i)]);
        REQUIRE(*keys[0][static_cast<size_t>(i)] == "concurrent::name" + std::to_string(i));
    }
}
