#include "open_lag.hpp"

#include "log.hpp"
#include "stackfrag/base/clock.hpp"
#include "task_watcher.hpp"

namespace sf::agent {

void OpenLag::snapshot_existing() {
    std::unordered_map<pid_t, uint64_t> snapshot;
    for (const TaskEntry& task : list_tasks()) snapshot[task.tid] = thread_cpu_ns_of(task.tid);
    std::lock_guard<std::mutex> lock(mutex_);
    counted_until_ = std::move(snapshot);
}

void OpenLag::on_open(pid_t tid, ThreadKind kind) { add(tid, kind, thread_cpu_ns_of(tid)); }

void OpenLag::add(pid_t tid, ThreadKind kind, uint64_t cpu_ns) {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t since = cpu_ns;
    if (auto found = counted_until_.find(tid); found != counted_until_.end()) {
        // Less than at the snapshot or the end: a new thread with a reused tid.
        if (cpu_ns >= found->second) since = cpu_ns - found->second;
        counted_until_.erase(found);
    }
    const size_t index = static_cast<size_t>(kind) < kThreadKinds ? static_cast<size_t>(kind) : 0;
    totals_.ns[index] += since;
    ++totals_.threads[index];
    if (since >= 1'000'000) {
        SF_LOG_DEBUG("thread %d (%s) ran %.1f ms before its event opened", tid, thread_kind_name(kind),
                     static_cast<double>(since) / 1e6);
    }
}

void OpenLag::on_end(pid_t tid, uint64_t cpu_ns) {
    std::lock_guard<std::mutex> lock(mutex_);
    counted_until_[tid] = cpu_ns;
}

uint64_t OpenLag::Totals::total_ns() const {
    uint64_t sum = 0;
    for (uint64_t part : ns) sum += part;
    return sum;
}

OpenLag::Totals OpenLag::totals() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return totals_;
}

}  // namespace sf::agent
