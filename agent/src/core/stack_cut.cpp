#include "stack_cut.hpp"

#include <algorithm>

namespace sf::agent {

namespace {
uint64_t round_up(uint64_t address) { return (address + 63) & ~uint64_t{63}; }
}  // namespace

std::optional<uint64_t> StackCutLearner::on_complete(uint32_t tid, const Walk& walk, uint64_t top, uint64_t exact_top) {
    if (walk.needed_end == 0) return std::nullopt;
    constexpr size_t kMaxThreads = 65536;   // bounded even if no end is ever announced
    auto found = threads_.find(tid);
    if (found == threads_.end()) {
        if (threads_.size() >= kMaxThreads) threads_.clear();
        found = threads_.emplace(tid, Thread{top, exact_top, 0, false, false}).first;
    }
    Thread& t = found->second;
    if (t.given_back) return std::nullopt;
    if (walk.to_first_native) {
        if (t.exact_top > walk.needed_end && !t.gap_seen) {
            t.gap_seen = true;
            observe_gap(t.exact_top - walk.needed_end);
        }
        return publish(t, round_up(walk.needed_end + kSlackBytes));
    }
    // A Java thread's walk to its first entry frame: its cut comes from its top and the gap.
    if (!gap_ || t.exact_top == 0 || t.exact_top <= *gap_) return std::nullopt;
    const uint64_t wanted = round_up(t.exact_top - *gap_ + kSlackBytes);
    if (wanted < walk.needed_end + kSlackBytes) return std::nullopt;   // not laid out as the others
    return publish(t, wanted);
}

std::optional<uint64_t> StackCutLearner::publish(Thread& t, uint64_t wanted) {
    if (t.cut != 0) {
        // A walk of a fragment read before the cut applied may have needed a little more.
        if (wanted <= t.cut) return std::nullopt;
        t.cut = wanted;
        return t.cut;
    }
    if (t.top_before != 0 && wanted + kMinGainBytes > t.top_before) return std::nullopt;
    t.cut = wanted;
    ++cut_;
    return t.cut;
}

void StackCutLearner::observe_gap(uint64_t gap) {
    if (gap_) {
        // Another thread laid out closer to its top: the cut must cover it too.
        if (gap < *gap_) gap_ = gap;
        return;
    }
    for (uint64_t other : gaps_) {
        if (std::max(gap, other) - std::min(gap, other) <= kGapAgreement) {
            gap_ = std::min(gap, other);
            gaps_.clear();
            return;
        }
    }
    if (gaps_.size() < 16) gaps_.push_back(gap);
}

bool StackCutLearner::from_missing_bytes(FailReason reason) {
    switch (reason) {
        case FailReason::kSpOutOfFragment:
        case FailReason::kNativeUnwindFailed:
        case FailReason::kBadEntryFrame:
        case FailReason::kStubUnwindFailed:
        case FailReason::kBadInterpreterFrame:
            return true;
        default:
            return false;
    }
}

std::optional<uint64_t> StackCutLearner::on_ran_off(uint32_t tid, uint64_t fragment_end) {
    auto found = threads_.find(tid);
    if (found == threads_.end()) return std::nullopt;
    Thread& t = found->second;
    if (t.cut == 0 || t.given_back || fragment_end < t.cut) return std::nullopt;
    t.given_back = true;
    t.cut = 0;
    ++given_back_;
    return t.top_before;
}

bool StackCutLearner::forget(uint32_t tid) {
    auto found = threads_.find(tid);
    if (found == threads_.end()) return false;
    const bool published = found->second.cut != 0 || found->second.given_back;
    threads_.erase(found);
    return published;
}

}  // namespace sf::agent
