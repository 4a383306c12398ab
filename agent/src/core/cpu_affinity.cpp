#include "cpu_affinity.hpp"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>

#include "stackfrag/kernel/perf_events.hpp"

namespace sf::agent {

namespace {
std::string trimmed(const std::string& text) {
    const size_t first = text.find_first_not_of(" \t");
    if (first == std::string::npos) return {};
    return text.substr(first, text.find_last_not_of(" \t") + 1 - first);
}
}  // namespace

ThreadsBeyondCpus threads_beyond_cpus(const std::vector<int>& sampled, const std::vector<int>& online,
                                      const std::string& task_dir) {
    ThreadsBeyondCpus out;
    DIR* tasks = opendir(task_dir.c_str());
    if (tasks == nullptr) return out;
    const std::set<int> known(sampled.begin(), sampled.end());
    const std::set<int> running(online.begin(), online.end());
    std::set<int> beyond;
    while (const dirent* entry = readdir(tasks)) {
        const long tid = std::strtol(entry->d_name, nullptr, 10);
        if (tid <= 0) continue;
        std::ifstream status(task_dir + "/" + entry->d_name + "/status");
        std::string line, name, allowed;
        while (std::getline(status, line)) {
            if (line.rfind("Name:", 0) == 0) name = trimmed(line.substr(5));
            if (line.rfind("Cpus_allowed_list:", 0) == 0) allowed = trimmed(line.substr(18));
        }
        Result<std::vector<int>> cpus = kernel::parse_cpu_list(allowed);
        if (allowed.empty() || !cpus.ok()) continue;
        bool outside = false;
        for (int cpu : *cpus) {
            if (known.count(cpu) == 0 && running.count(cpu) != 0) {
                beyond.insert(cpu);
                outside = true;
            }
        }
        if (!outside) continue;
        if (out.threads++ == 0) out.example = name + " (tid " + std::to_string(tid) + ")";
    }
    closedir(tasks);
    out.cpus.assign(beyond.begin(), beyond.end());
    return out;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
    std::string text;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        if (!text.empty()) text += ',';
        text += std::to_string(cpus[i]);
        if (j > i) text += '-' + std::to_string(cpus[j]);
        i = j + 1;
    }
    return text;
}

}  // namespace sf::agent
