// mode=cpu's check at the stop for threads that may run beyond the CPUs it opened events on.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "cpu_affinity.hpp"
#include "test_env.hpp"

namespace {
void write_status(const std::string& dir, int tid, const std::string& name, const std::string& allowed) {
    std::filesystem::create_directories(dir + "/" + std::to_string(tid));
    std::ofstream(dir + "/" + std::to_string(tid) + "/status")
        << "Name:\t" << name << "\nUmask:\t0022\nState:\tS (sleeping)\nCpus_allowed:\tff\nCpus_allowed_list:\t" << allowed
        << "\nMems_allowed_list:\t0\n";
}
}  // namespace

TEST_CASE("threads whose affinity holds CPUs without a per-CPU event are counted, with the CPUs and one of them") {
    sf::test::ScratchDir scratch("cpu-affinity");
    const std::string tasks = scratch.path() + "/task";
    write_status(tasks, 100, "java", "2-3");
    write_status(tasks, 101, "GC Thread#0", "2-3");
    write_status(tasks, 103, "C2 CompilerThre", "2");

    const std::vector<int> online{0, 1, 2, 3, 4, 5, 6, 7};
    const sf::agent::ThreadsBeyondCpus none = sf::agent::threads_beyond_cpus({2, 3}, online, tasks);
    CHECK(none.threads == 0);
    CHECK(none.cpus.empty());

    write_status(tasks, 102, "pinned worker", "0,2-3,7");
    write_status(tasks, 104, "widened", "0-3");
    const sf::agent::ThreadsBeyondCpus beyond = sf::agent::threads_beyond_cpus({2, 3}, online, tasks);
    CHECK(beyond.threads == 2);   // 102 and 104
    CHECK(beyond.cpus == std::vector<int>{0, 1, 7});
    CHECK((beyond.example == "pinned worker (tid 102)" || beyond.example == "widened (tid 104)"));
    // Every CPU sampled: nothing beyond.
    CHECK(sf::agent::threads_beyond_cpus({0, 1, 2, 3, 7}, online, tasks).threads == 0);
}

TEST_CASE("a default affinity over every possible CPU is not taken for a widened one: only online CPUs count") {
    sf::test::ScratchDir scratch("cpu-affinity");
    const std::string tasks = scratch.path() + "/task";
    // A VM with room to hot-plug: 4 CPUs online of 240 possible, every thread's mask the possible ones.
    write_status(tasks, 300, "java", "0-239");
    write_status(tasks, 301, "GC Thread#0", "0-239");
    CHECK(sf::agent::threads_beyond_cpus({0, 1, 2, 3}, {0, 1, 2, 3}, tasks).threads == 0);
    const sf::agent::ThreadsBeyondCpus container = sf::agent::threads_beyond_cpus({2, 3}, {0, 1, 2, 3}, tasks);
    CHECK(container.threads == 2);
    CHECK(container.cpus == std::vector<int>{0, 1});
}

TEST_CASE("the affinity check skips threads it cannot read, and a missing task directory") {
    sf::test::ScratchDir scratch("cpu-affinity");
    const std::string tasks = scratch.path() + "/task";
    write_status(tasks, 200, "garbled", "zero-three");
    write_status(tasks, 201, "", "");
    std::filesystem::create_directories(tasks + "/202");   // ended meanwhile: no status
    std::filesystem::create_directories(tasks + "/not-a-tid");
    CHECK(sf::agent::threads_beyond_cpus({0}, {0, 1}, tasks).threads == 0);
    CHECK(sf::agent::threads_beyond_cpus({0}, {0, 1}, scratch.path() + "/absent").threads == 0);
}

TEST_CASE("CPU lists are written as the kernel writes them") {
    CHECK(sf::agent::cpu_list_text({}).empty());
    CHECK(sf::agent::cpu_list_text({5}) == "5");
    CHECK(sf::agent::cpu_list_text({0, 1, 2, 3}) == "0-3");
    CHECK(sf::agent::cpu_list_text({0, 2, 3, 4, 7, 9, 10}) == "0,2-4,7,9-10");
}
