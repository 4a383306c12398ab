#include "task_watcher.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <unordered_set>

#include "stackfrag/base/clock.hpp"
#include "log.hpp"
#include "own_threads.hpp"
#include "stackfrag/hotspot/thread_names.hpp"

namespace sf::agent {

namespace {

std::string read_comm(pid_t tid) {
    const std::string path = "/proc/self/task/" + std::to_string(tid) + "/comm";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    char buffer[64];
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    ::close(fd);
    if (got <= 0) return {};
    std::string name(buffer, static_cast<size_t>(got));
    while (!name.empty() && (name.back() == '\n' || name.back() == '\0')) name.pop_back();
    return name;
}

}  // namespace

std::vector<TaskEntry> list_tasks() {
    std::vector<TaskEntry> tasks;
    DIR* dir = opendir("/proc/self/task");
    if (dir == nullptr) return tasks;
    while (dirent* entry = readdir(dir)) {
        const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
        if (tid > 0) tasks.push_back({tid, {}});
    }
    closedir(dir);
    return tasks;
}

std::string ring_memory_limit() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("CapEff:", 0) != 0) continue;
        const unsigned long long caps = std::strtoull(line.c_str() + 7, nullptr, 16);
        if ((caps & (1ull << 14)) != 0) return {};   // CAP_IPC_LOCK
    }
    rlimit memlock{};
    if (getrlimit(RLIMIT_MEMLOCK, &memlock) == 0 && memlock.rlim_cur == RLIM_INFINITY) return {};
    std::ifstream sysctl("/proc/sys/kernel/perf_event_mlock_kb");
    long mlock_kb = 0;
    sysctl >> mlock_kb;
    return "ring memory is limited (kernel.perf_event_mlock_kb " + std::to_string(mlock_kb) + " per CPU, ulimit -l " +
           std::to_string(memlock.rlim_cur / 1024) + " KB) and goes to the Java threads";
}

TaskWatcher::TaskWatcher(EventQueue& queue, Sampler* sampler, std::function<bool(pid_t)> is_java, int full_scan_ms)
    : queue_(queue), sampler_(sampler), is_java_(std::move(is_java)),
      full_scan_ns_(static_cast<uint64_t>(full_scan_ms) * 1'000'000),
      task_dir_(::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {}

bool task_scan_due(uint64_t links, uint64_t links_at_last_scan, bool sightings_pending, uint64_t since_last_scan_ns,
                   uint64_t full_every_ns) {
    return links == 0 || links != links_at_last_scan || sightings_pending || since_last_scan_ns >= full_every_ns;
}

TaskWatcher::~TaskWatcher() {
    stop();
    if (task_dir_ >= 0) ::close(task_dir_);
}

uint64_t TaskWatcher::task_links() const {
    // The link count of /proc/PID/task is 2 + the number of threads (0 here: not known).
    struct stat status {};
    return task_dir_ >= 0 && ::fstat(task_dir_, &status) == 0 ? status.st_nlink : 0;
}

bool TaskWatcher::scan_due(uint64_t links, uint64_t now) const {
    return task_scan_due(links, links_at_scan_.load(std::memory_order_relaxed),
                         sightings_pending_.load(std::memory_order_relaxed),
                         now - last_scan_ns_.load(std::memory_order_relaxed), full_scan_ns_);
}

bool TaskWatcher::tick() {
    ticks_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t links = task_links();
    const uint64_t now = monotonic_ns();
    if (!scan_due(links, now)) return false;
    // The count before the listing: a thread that starts during it changes the count after it.
    links_at_scan_.store(links, std::memory_order_relaxed);
    last_scan_ns_.store(now, std::memory_order_relaxed);
    scan();
    return true;
}

void TaskWatcher::on_reader_cycle(uint64_t now_ns) {
    // At the watcher's own interval (a cycle a little early still counts: cadence and interval
    // are both 100 ms at low rates, and a strict bound skipped every second cycle).
    const uint64_t interval_ns = static_cast<uint64_t>(interval_ms_) * 1'000'000;
    if (now_ns - last_reader_look_ns_ < interval_ns / 10 * 9) return;
    last_reader_look_ns_ = now_ns;
    reader_looks_.fetch_add(1, std::memory_order_relaxed);
    if (!scan_due(task_links(), now_ns)) return;
    {
        std::lock_guard<std::mutex> lock(wake_mutex_);   // held by others only for a moment
        scan_requested_ = true;
    }
    wakeup_.notify_one();
}

void TaskWatcher::scan() {
    scans_.fetch_add(1, std::memory_order_relaxed);
    std::vector<TaskEntry> tasks = list_tasks();
    if (tasks.empty()) return;
    EventQueue::InFlight in_flight(queue_);
    std::lock_guard<std::mutex> lock(mutex_);
    std::unordered_set<pid_t> alive;
    alive.reserve(tasks.size());
    for (TaskEntry& task : tasks) {
        alive.insert(task.tid);
        if (is_java_(task.tid)) {
            // A native thread that attached to the VM is a Java thread now: ThreadStart announced it.
            announced_.erase(task.tid);
            sightings_.erase(task.tid);
            continue;
        }
        if (announced_.count(task.tid) != 0) continue;
        task.name = read_comm(task.tid);
        const ThreadKind kind = hotspot::native_thread_kind(task.name);
        // A new thread is named "java" (its creator's name) until it names itself, and a Java
        // thread exists for a moment before its ThreadStart registers it: only the VM's own names
        // (GC, compiler, VM) are taken at first sight, the others at the next scan.
        if (kind == ThreadKind::kOther && ++sightings_[task.tid] < 2) continue;
        // A thread of the agent's that the spawner has just created bears the spawner's name until
        // its first instruction renames it; a scan then (thread creation itself asks for one) would
        // announce the live decoder as "stackfrag-spawn" for the whole run, and its CPU would show
        // under that name (the all-threads test's decoder check, once in a CI run under load).
        // Like any thread not named by the VM, it is taken at its second sighting.
        if (task.name == kSpawnerThreadName && ++sightings_[task.tid] < 2) continue;
        sightings_.erase(task.tid);
        // The agent's own threads are in the profile too: one that explains all of the process's
        // CPU shows the profiler's share under their names, beside the stop summary's exact
        // "agent threads CPU" line. Not by perf samples: each cost the sampled thread ~45 us on
        // this project's VM (a third of the agent's CPU time at 10 kHz went into sampling itself),
        // so their thread clocks are read each reader cycle instead (Sampler::account_by_clock).
        // Their samples decode as the top frame alone: walking the live decoder's own deep native
        // stacks cost more than decoding the application's samples did.
        if (task.name.empty()) {
            announced_.emplace(task.tid, std::string());   // remembered, never announced
            continue;
        }
        SF_LOG_DEBUG("native thread %d '%s'", task.tid, task.name.c_str());
        queue_.emit(ThreadInfo{monotonic_ns(), static_cast<uint32_t>(task.tid), false, task.name, kind});
        if (sampler_ != nullptr) {
            if (open_lag_ != nullptr) open_lag_->on_open(task.tid, kind);
            if (kind == ThreadKind::kProfiler) {
                sampler_->account_by_clock(task.tid);
            } else {
                Status added = sampler_->add_thread(task.tid);
                if (!added.ok()) SF_LOG_DEBUG("native thread %d: %s", task.tid, added.error().describe().c_str());
            }
        }
        announced_.emplace(task.tid, std::move(task.name));
    }
    for (auto it = announced_.begin(); it != announced_.end();) {
        if (alive.count(it->first) != 0) {
            ++it;
            continue;
        }
        if (!it->second.empty()) {
            queue_.emit(ThreadInfo{monotonic_ns(), static_cast<uint32_t>(it->first), true, it->second,
                                   hotspot::native_thread_kind(it->second)});
            // Its ring hung up when it exited; this closes it should the hang-up have been missed.
            if (sampler_ != nullptr) sampler_->end_thread(it->first);
        }
        it = announced_.erase(it);
    }
    for (auto it = sightings_.begin(); it != sightings_.end();) {
        it = alive.count(it->first) != 0 ? std::next(it) : sightings_.erase(it);
    }
    sightings_pending_.store(!sightings_.empty(), std::memory_order_relaxed);
}

Status TaskWatcher::start(int interval_ms) {
    interval_ms_ = interval_ms;
    const int created = create_own_thread(&thread_, &TaskWatcher::main, this, "stackfrag-tasks");
    if (created != 0) return sys_error(Errc::kResourceLimit, created, "pthread_create(thread watcher)");
    std::lock_guard<std::mutex> lock(wake_mutex_);
    started_ = true;
    return {};
}

void* TaskWatcher::main(void* self) {
    auto* watcher = static_cast<TaskWatcher*>(self);
    while (true) {
        {
            // Riding on the reader, the watcher sleeps until the reader's look finds a scan due,
            // and at most a full scan's interval (should the reader stop looking).
            const auto wait = watcher->riding_ ? std::chrono::milliseconds(watcher->full_scan_ns_ / 1'000'000)
                                               : std::chrono::milliseconds(watcher->interval_ms_);
            std::unique_lock<std::mutex> lock(watcher->wake_mutex_);
            watcher->wakeup_.wait_for(lock, wait, [watcher] { return watcher->stop_ || watcher->scan_requested_; });
            if (watcher->stop_) break;
            watcher->scan_requested_ = false;
        }
        watcher->tick();
        watcher->cpu_ns_.store(thread_cpu_ns(), std::memory_order_relaxed);
    }
    return nullptr;
}

void TaskWatcher::stop() {
    bool join = false;
    {
        std::lock_guard<std::mutex> lock(wake_mutex_);
        stop_ = true;
        join = started_;
        started_ = false;
    }
    wakeup_.notify_all();
    if (join) pthread_join(thread_, nullptr);
}

uint64_t TaskWatcher::scans() const { return scans_.load(std::memory_order_relaxed); }
uint64_t TaskWatcher::ticks() const { return ticks_.load(std::memory_order_relaxed); }

size_t TaskWatcher::native_threads() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t count = 0;
    for (const auto& [tid, name] : announced_) count += name.empty() ? 0 : 1;
    return count;
}

}  // namespace sf::agent
