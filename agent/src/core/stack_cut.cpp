#include "stack_cut.hpp"

namespace sf::agent {

std::optional<uint64_t> StackCutLearner::on_complete(uint32_t tid, uint64_t needed_end,
                                                     std::optional<uint64_t> known_top) {
    if (needed_end == 0) return std::nullopt;
    constexpr size_t kMaxThreads = 65536;   // bounded even if no end is ever announced
    auto found = threads_.find(tid);
    if (found == threads_.end()) {
        if (threads_.size() >= kMaxThreads) threads_.clear();
        found = threads_.emplace(tid, Thread{known_top.value_or(0), 0, false}).first;
    }
    Thread& t = found->second;
    if (t.given_back) return std::nullopt;
    const uint64_t wanted = (needed_end + kSlackBytes + 63) & ~uint64_t{63};
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

}  // namespace sf::agent
