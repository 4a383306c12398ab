#include "thread_registry.hpp"

#include <algorithm>

#include "stack_controller.hpp"

namespace sf::agent {

bool ThreadRegistry::add(pid_t tid, std::string name) {
    std::lock_guard<std::mutex> lock(mutex_);
    return names_.emplace(tid, std::move(name)).second;
}

std::optional<std::string> ThreadRegistry::remove(pid_t tid) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = names_.find(tid);
    if (found == names_.end()) return std::nullopt;
    std::string name = std::move(found->second);
    names_.erase(found);
    on_perf_.erase(tid);
    return name;
}

void ThreadRegistry::set_on_perf(pid_t tid) {
    std::lock_guard<std::mutex> lock(mutex_);
    on_perf_.insert(tid);
}

std::vector<pid_t> ThreadRegistry::not_on_perf(pid_t except) const {
    std::vector<pid_t> out;
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [tid, name] : names_) {
        if (on_perf_.count(tid) == 0 && tid != except) out.push_back(tid);
    }
    return out;
}

bool ThreadRegistry::contains(pid_t tid) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return names_.count(tid) != 0;
}

size_t ThreadRegistry::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return names_.size();
}

bool BackendSelection::should_fall_back(const std::optional<Error>& denied) {
    if (requested_ != SamplingBackend::kAuto || mode_ == SamplingMode::kJvmti || !denied) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (fallback_tried_) return false;
    fallback_tried_ = true;
    return true;
}

void BackendSelection::use_signal(std::string why) {
    std::lock_guard<std::mutex> lock(mutex_);
    reason_ = std::move(why);
    signal_ = true;
}

bool BackendSelection::signal() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return signal_;
}

std::string BackendSelection::text() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return signal_ ? "signal (" + reason_ + ")" : "perf";
}

OracleSettings timer_settings(const AgentOptions& options, uint64_t cpus, bool for_samples) {
    OracleSettings settings;
    settings.interval_ns = options.interval_ns;
    settings.stack_bytes = options.stack_bytes;
    if (for_samples) {
        const uint64_t per_cpu = 20'000'000 / std::max<uint64_t>(options.interval_ns, 1) + 1;
        settings.buffer_entries = static_cast<uint32_t>(std::clamp<uint64_t>(std::max<uint64_t>(cpus, 1) * per_cpu, 512, 4096));
    }
    if (!options.validate) settings.max_frames = 0;
    if (options.validate && options.stack_auto && options.mode == SamplingMode::kThread && !for_samples) {
        // stack=auto grows perf's fragments of deep threads; the oracle copies as much of their
        // stack (as perf does at most) into larger entries: about 20 ms of ticks on every CPU.
        const uint64_t per_cpu = 20'000'000 / std::max<uint64_t>(options.interval_ns, 1) + 1;
        settings.large_stack_bytes = StackControllerSettings{}.largest_fragment;
        settings.large_entries = static_cast<uint32_t>(std::clamp<uint64_t>(std::max<uint64_t>(cpus, 1) * per_cpu, 64, 512));
    }
    return settings;
}

}  // namespace sf::agent
