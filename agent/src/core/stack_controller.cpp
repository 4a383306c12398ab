#include "stack_controller.hpp"

#include <algorithm>

namespace sf::agent {

StackController::StackController(StackControllerSettings settings) : settings_(settings) {}

bool fragment_short_of_outermost(uint64_t sp, size_t fragment_bytes, uint64_t stack_top, uint32_t entry_margin) {
    if (stack_top == 0 || sp >= stack_top) return false;
    const uint64_t below_top = stack_top - sp;   // no overflow: sp < stack_top
    return below_top > fragment_bytes && below_top - fragment_bytes > entry_margin;
}

uint32_t StackController::bytes_of(uint32_t tid) const {
    auto found = threads_.find(tid);
    return found == threads_.end() ? settings_.base_bytes : found->second.bytes;
}

// Halving, rounded down to a multiple of 8, never below the base.
uint32_t StackController::smaller(uint32_t bytes) const {
    return std::max(settings_.base_bytes, (bytes / 2) & ~7u);
}

std::optional<StackChange> StackController::on_sample(uint32_t tid, TraceStatus status, size_t fragment_bytes) {
    // Bounded: threads whose end was never announced must not pile up.
    constexpr size_t kMaxThreads = 4096;
    auto found = threads_.find(tid);
    if (status == TraceStatus::kIncomplete) {
        const uint32_t now = found == threads_.end() ? settings_.base_bytes : found->second.bytes;
        if (fragment_bytes < std::min(now, settings_.largest_fragment)) return std::nullopt;
        if (now >= settings_.max_bytes) {
            // Deeper than any fragment: the largest one still gives the most frames.
            if (found != threads_.end()) found->second.quiet = 0;
            return std::nullopt;
        }
        if (found == threads_.end()) {
            if (threads_.size() >= kMaxThreads) threads_.clear();
            found = threads_.emplace(tid, Thread{now, 0, 0, settings_.quiet_samples}).first;
        }
        Thread& t = found->second;
        StackChange change{tid, t.bytes, settings_.max_bytes, "samples ran off the fragment"};
        if (t.before_shrink != 0) {
            // A trial shrink that did not hold: back to the size that did, and wait longer next time
            // if it failed soon.
            change.new_bytes = t.before_shrink;
            change.why = "samples ran off the fragment after it shrank";
            if (t.quiet < 2ull * t.quiet_needed) {
                t.quiet_needed = std::min(settings_.max_quiet_samples, t.quiet_needed * 2);
            }
        }
        t.bytes = change.new_bytes;
        t.before_shrink = 0;
        t.quiet = 0;
        return change;
    }
    if (found == threads_.end() || status == TraceStatus::kFailed) return std::nullopt;
    Thread& t = found->second;
    ++t.quiet;
    if (t.bytes <= settings_.base_bytes) {
        // Back at the base after a trial that held for as long again: the next episode starts afresh.
        if (t.quiet >= 2ull * t.quiet_needed) threads_.erase(found);
        return std::nullopt;
    }
    if (t.quiet < t.quiet_needed) return std::nullopt;
    StackChange change{tid, t.bytes, smaller(t.bytes), "no sample ran off the fragment for a while"};
    t.before_shrink = t.bytes;
    t.bytes = change.new_bytes;
    t.quiet = 0;
    return change;
}

}  // namespace sf::agent
