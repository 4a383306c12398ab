// mode=cpu samples a thread only on the CPUs it opened events on (those the JVM could run on at its
// start): which threads may now run elsewhere, so that the stop summary says whose time is missing.
#pragma once

#include <string>
#include <vector>

namespace sf::agent {

struct ThreadsBeyondCpus {
    size_t threads = 0;       // threads whose affinity holds a CPU outside the sampled ones
    std::vector<int> cpus;    // those CPUs, in increasing order
    std::string example;      // one such thread, "name (tid N)"
};

// Reads `task_dir`/TID/status (Name, Cpus_allowed_list) of every thread and counts the `online`
// CPUs in its affinity that are not `sampled` (a default affinity holds every possible CPU, also
// those a VM may hot-plug later: only online ones can run a thread). A thread that ended
// meanwhile, or whose status cannot be parsed, counts as nothing.
ThreadsBeyondCpus threads_beyond_cpus(const std::vector<int>& sampled, const std::vector<int>& online,
                                      const std::string& task_dir = "/proc/self/task");

// "0-3,5": a sorted list of CPUs as the kernel writes one.
std::string cpu_list_text(const std::vector<int>& cpus);

}  // namespace sf::agent
