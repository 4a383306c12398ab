// What the agent writes and opens, on a real JVM (JDK 17): raw stack bytes reach a file only with
// record=; its files are 0600; a symlink planted where file=, record= or log= points is never
// written through (the target stays as it was and the log says why); no listening socket.
// docs/security.md says the same to users.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent_process.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
using sf::test::kJdk17;
const std::string kJava = kJdk17 + "/bin/java";

using sf::test::contains;

class SecurityDir {
public:
    SecurityDir() {
        std::string pattern = "/tmp/sf-security-XXXXXX";
        REQUIRE(mkdtemp(pattern.data()) != nullptr);
        path = pattern;
        std::filesystem::create_directory(path + "/classes");
        const sf::test::ProcessResult r = sf::test::run_process(
            {kJdk17 + "/bin/javac", "-d", path + "/classes", STACKFRAG_SOURCE_DIR "/tests/integration/java/Faults.java"},
            {}, path + "/javac", 120);
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        std::filesystem::create_directory(path + "/work");
    }
    ~SecurityDir() { std::filesystem::remove_all(path); }
    std::string path;
};

// java in DIR/work (its working directory), so files it might write of its own accord land there.
sf::test::ProcessResult run_in_work_dir(const SecurityDir& dir, const std::string& java_args) {
    const std::string command = "cd '" + dir.path + "/work' && exec " + sf::test::java_preload_prefix() + kJava + " " + java_args;
    return sf::test::run_process({"/bin/sh", "-c", command}, {}, dir.path + "/jvm", 90);
}

mode_t mode_of(const std::string& path) {
    struct stat st{};
    REQUIRE(stat(path.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

std::set<std::string> names_in(const std::string& dir) {
    std::set<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) names.insert(entry.path().filename().string());
    return names;
}

// The inodes of the sockets the process has open.
std::set<std::string> socket_inodes(pid_t pid) {
    std::set<std::string> inodes;
    const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(fd_dir, ec)) {
        const std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
        if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
    }
    return inodes;
}

// Of those, the ones listening: tcp/tcp6 in state 0A (LISTEN), unix sockets with __SO_ACCEPTCON.
std::vector<std::string> listeners(pid_t pid) {
    const std::set<std::string> mine = socket_inodes(pid);
    std::vector<std::string> found;
    for (const char* table : {"tcp", "tcp6", "udp", "udp6", "unix"}) {
        std::istringstream lines(sf::test::read_text_file("/proc/" + std::to_string(pid) + "/net/" + table));
        std::string line;
        std::getline(lines, line);   // header
        while (std::getline(lines, line)) {
            std::istringstream fields(line);
            std::vector<std::string> f;
            for (std::string word; fields >> word;) f.push_back(word);
            const bool unix_table = std::string(table) == "unix";
            // unix: Num RefCount Protocol Flags Type St Inode [Path]; inet: ... st(3) ... inode(9)
            if (f.size() < (unix_table ? 7u : 10u)) continue;
            const std::string inode = unix_table ? f[6] : f[9];
            if (!mine.contains(inode)) continue;
            const bool listening = unix_table ? (std::stoul(f[3], nullptr, 16) & 0x10000) != 0
                                              : (std::string(table).rfind("tcp", 0) == 0 && f[3] == "0A") ||
                                                    std::string(table).rfind("udp", 0) == 0;
            if (listening) found.push_back(std::string(table) + ": " + line);
        }
    }
    return found;
}

}  // namespace

TEST_CASE("raw stacks are written only with record=, and every file the agent writes is 0600", "[security]") {
    SecurityDir dir;
    const std::string out = dir.path + "/profile.json";
    const auto live = run_in_work_dir(dir, "-agentpath:" + kAgent + "=interval=1ms,file=" + out + " -cp " + dir.path +
                                               "/classes Faults busy 2 800");
    INFO(live.err);
    REQUIRE(live.exit_code == 0);
    CHECK(names_in(dir.path + "/work").empty());   // nothing of its own accord in the working directory
    CHECK(mode_of(out) == 0600);
    // Without file= and record= (the stop summary only), nothing at all is written.
    const auto quiet = run_in_work_dir(dir, "-agentpath:" + kAgent + "=interval=1ms -cp " + dir.path + "/classes Faults busy 2 500");
    REQUIRE(quiet.exit_code == 0);
    CHECK(names_in(dir.path + "/work").empty());
    CHECK(contains(quiet.err, "stop summary"));

    const std::string rec = dir.path + "/run.sfr", log = dir.path + "/agent.log";
    const auto recorded = run_in_work_dir(dir, "-agentpath:" + kAgent + "=interval=1ms,record=" + rec + ",log=" + log +
                                                   " -cp " + dir.path + "/classes Faults busy 2 500");
    REQUIRE(recorded.exit_code == 0);
    CHECK(mode_of(rec) == 0600);
    CHECK(mode_of(log) == 0600);
    CHECK(names_in(dir.path + "/work").empty());
}

TEST_CASE("a symlink planted for file=, record= or log= is not written through", "[security]") {
    SecurityDir dir;
    const std::string target = dir.path + "/precious.txt";
    const std::string precious = "the file an attacker would like overwritten\n";
    std::ofstream(target) << precious;
    const std::string classes = " -cp " + dir.path + "/classes Faults busy 1 300";

    SECTION("file=: the profile is not written there, the JVM runs on and the log says why") {
        const std::string link = dir.path + "/profile.json";
        std::filesystem::create_symlink(target, link);
        const auto r = run_in_work_dir(dir, "-agentpath:" + kAgent + "=interval=1ms,file=" + link + classes);
        INFO(r.err);
        CHECK(r.exit_code == 0);
        CHECK(contains(r.err, link + ": it is a symbolic link"));
        CHECK(std::filesystem::is_symlink(link));
    }
    SECTION("record=: the JVM does not start, and the message names the file") {
        const std::string link = dir.path + "/run.sfr";
        std::filesystem::create_symlink(target, link);
        const auto r = run_in_work_dir(dir, "-agentpath:" + kAgent + "=record=" + link + classes);
        INFO(r.err);
        CHECK(r.exit_code != 0);
        CHECK(contains(r.err, "bad value '" + link + "' for record"));
    }
    SECTION("log=: the JVM does not start, and the message says it is a link") {
        const std::string link = dir.path + "/agent.log";
        std::filesystem::create_symlink(target, link);
        const auto r = run_in_work_dir(dir, "-agentpath:" + kAgent + "=log=" + link + classes);
        INFO(r.err);
        CHECK(r.exit_code != 0);
        CHECK(contains(r.err, "symbolic link"));
    }
    CHECK(sf::test::read_text_file(target) == precious);
}

TEST_CASE("the agent opens no listening socket", "[security]") {
    SecurityDir dir;
    auto listeners_of = [&](const std::string& agent) {
        std::vector<std::string> args{kJava};
        if (!agent.empty()) args.push_back(agent);
        args.insert(args.end(), {"-cp", dir.path + "/classes", "Faults", "sleep", "4000"});
        sf::test::BackgroundProcess jvm(args, dir.path + "/sock");
        // Long enough for the agent to be up and sampling (its threads and perf events exist).
        std::this_thread::sleep_for(std::chrono::milliseconds(2000));
        REQUIRE(jvm.running());
        std::pair<size_t, std::vector<std::string>> found{socket_inodes(jvm.pid()).size(), listeners(jvm.pid())};
        CHECK(jvm.wait(30) == 0);
        return found;
    };
    const auto [sockets_without, listening_without] = listeners_of("");
    const auto [sockets_with, listening_with] =
        listeners_of("-agentpath:" + kAgent + "=interval=1ms,file=" + dir.path + "/p.json");
    for (const std::string& l : listening_with) UNSCOPED_INFO(l);
    CHECK(listening_with.empty());
    CHECK(listening_without.empty());
    CHECK(sockets_with == sockets_without);
    std::printf("security: sockets of the JVM: %zu without the agent, %zu with it; listening with it: %zu\n",
                sockets_without, sockets_with, listening_with.size());
}
