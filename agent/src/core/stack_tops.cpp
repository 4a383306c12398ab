#include "stack_tops.hpp"

namespace sf::agent {

void StackTops::remember(uint32_t tid, uint64_t top, uint64_t since_ns, bool exact) {
    std::lock_guard<std::mutex> lock(mutex_);
    constexpr size_t kMaxThreads = 65536;   // bounded even if no end is ever announced
    if (tops_.size() >= kMaxThreads) tops_.clear();
    tops_[tid] = Top{top, since_ns, exact};
    generation_.fetch_add(1, std::memory_order_release);
}

void StackTops::forget(uint32_t tid, uint64_t ended_ns) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = tops_.find(tid);
    if (found != tops_.end() && found->second.since_ns <= ended_ns) {
        tops_.erase(found);
        generation_.fetch_add(1, std::memory_order_release);
    }
}

std::optional<uint64_t> StackTops::lookup(uint32_t tid) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = tops_.find(tid);
    return found == tops_.end() ? std::nullopt : std::optional<uint64_t>(found->second.top);
}

uint64_t StackTops::exact_top(uint32_t tid) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = tops_.find(tid);
    return found != tops_.end() && found->second.exact ? found->second.top : 0;
}

void StackTops::copy_to(Copy& copy) const {
    std::lock_guard<std::mutex> lock(mutex_);
    copy.tops_.clear();
    for (const auto& [tid, top] : tops_) copy.tops_.emplace(tid, top.top);
    copy.generation_ = generation_.load(std::memory_order_relaxed);
}

}  // namespace sf::agent
