#include "stack_controller.hpp"

#include <algorithm>

namespace sf::agent {

StackController::StackController(StackControllerSettings settings) : settings_(settings) {}

bool fragment_short_of_outermost(uint64_t sp, size_t fragment_bytes, uint64_t stack_top, uint32_t entry_margin) {
    if (stack_top == 0 || sp >= stack_top) return false;
    const uint64_t below_top = stack_top - sp;   // no overflow: sp < stack_top
    return below_top > fragment_bytes && below_top - fragment_bytes > entry_margin;
}

std::string thread_family(std::string_view name) {
    size_t end = name.size();
    while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9') --end;
    if (end == name.size() || end == 0) return {};
    const std::string_view family = name.substr(0, end);
    return family == "Thread-" ? std::string() : std::string(family);
}

uint32_t StackController::bytes_of(uint32_t tid) const {
    auto found = threads_.find(tid);
    return found == threads_.end() ? settings_.base_bytes : found->second.bytes;
}

// Halving, rounded down to a multiple of 8, never below the base.
uint32_t StackController::smaller(uint32_t bytes) const {
    return std::max(settings_.base_bytes, (bytes / 2) & ~7u);
}

// Bounded: threads whose end was never announced must not pile up.
constexpr size_t kMaxThreads = 4096;
constexpr size_t kMaxNamedThreads = 65536;
constexpr size_t kMaxFamilies = 4096;
constexpr const char* kFamilyRanOff = "a thread of its family ran off the fragment";

StackController::Thread& StackController::track(uint32_t tid, uint32_t bytes) {
    if (threads_.size() >= kMaxThreads) threads_.clear();
    ++generation_;
    return threads_.emplace(tid, Thread{bytes, 0, 0, settings_.quiet_samples}).first->second;
}

bool StackController::eager(const std::string& family, uint32_t joining) const {
    auto members = family_members_.find(family);
    return (members == family_members_.end() ? 0 : members->second) + joining <= kEagerFamilyMembers;
}

void StackController::leave_family(uint32_t tid) {
    auto member = family_of_.find(tid);
    if (member == family_of_.end()) return;
    auto members = family_members_.find(member->second.family);
    if (members != family_members_.end() && --members->second == 0) family_members_.erase(members);
    family_of_.erase(member);
}

void StackController::forget(uint32_t tid) {
    if (threads_.erase(tid) != 0) ++generation_;
    shallow_.erase(tid);
    leave_family(tid);
}

std::optional<StackChange> StackController::on_thread_started(uint32_t tid, const std::string& family) {
    if (family.empty()) return std::nullopt;
    if (family_of_.size() >= kMaxNamedThreads) {
        family_of_.clear();
        family_members_.clear();
    }
    leave_family(tid);   // a tid seen before (its end missed) is a new thread
    family_of_[tid] = Member{family, 0};
    ++family_members_[family];
    auto deep = family_deep_.find(family);
    if (deep == family_deep_.end() || !deep->second || threads_.count(tid) != 0 ||
        settings_.base_bytes >= settings_.max_bytes || !eager(family)) {
        return std::nullopt;
    }
    track(tid, settings_.max_bytes);
    return StackChange{tid, settings_.base_bytes, settings_.max_bytes, kFamilyRanOff};
}

std::optional<StackChange> StackController::start_large(uint32_t tid, const char* why) {
    if (threads_.count(tid) != 0 || settings_.base_bytes >= settings_.max_bytes) return std::nullopt;
    track(tid, settings_.max_bytes);
    return StackChange{tid, settings_.base_bytes, settings_.max_bytes, why};
}

uint32_t StackController::start_bytes(const std::string& family, bool large) const {
    if (settings_.base_bytes >= settings_.max_bytes) return settings_.base_bytes;
    if (large) return settings_.max_bytes;
    auto deep = family.empty() ? family_deep_.end() : family_deep_.find(family);
    return deep != family_deep_.end() && deep->second && eager(family, 1) ? settings_.max_bytes : settings_.base_bytes;
}

void StackController::family_ran_off(uint32_t tid) {
    auto family = family_of_.find(tid);
    if (family == family_of_.end()) return;
    if (family_deep_.size() >= kMaxFamilies && family_deep_.count(family->second.family) == 0) family_deep_.clear();
    bool& deep = family_deep_[family->second.family];
    if (deep) return;   // its threads grew when it turned deep, or at their first sample since
    deep = true;
    const bool all = eager(family->second.family);
    for (const auto& [other, member] : family_of_) {
        if (other == tid || (!all && member.samples < settings_.active_samples) || member.family != family->second.family ||
            threads_.count(other) != 0) {
            continue;
        }
        family_changes_.push_back(StackChange{other, settings_.base_bytes, settings_.max_bytes, kFamilyRanOff});
    }
    for (const StackChange& change : family_changes_) track(change.tid, change.new_bytes);
}

std::optional<StackChange> StackController::on_sample(uint32_t tid, TraceStatus status, size_t fragment_bytes) {
    auto found = threads_.find(tid);
    if (auto member = family_of_.find(tid);
        member != family_of_.end() && member->second.samples < settings_.active_samples &&
        ++member->second.samples == settings_.active_samples) {
        // It runs now: a thread of a family that runs deep grows (see on_thread_started).
        auto deep = family_deep_.find(member->second.family);
        if (found == threads_.end() && deep != family_deep_.end() && deep->second &&
            settings_.base_bytes < settings_.max_bytes) {
            track(tid, settings_.max_bytes);
            return StackChange{tid, settings_.base_bytes, settings_.max_bytes, kFamilyRanOff};
        }
    }
    if (status == TraceStatus::kIncomplete) {
        const uint32_t now = found == threads_.end() ? settings_.base_bytes : found->second.bytes;
        if (fragment_bytes < std::min(now, settings_.largest_fragment)) return std::nullopt;
        if (now >= settings_.max_bytes) {
            // Deeper than any fragment: the largest one still gives the most frames.
            if (found != threads_.end()) found->second.quiet = 0;
            return std::nullopt;
        }
        Thread& t = found == threads_.end() ? track(tid, now) : found->second;
        if (t.bytes < settings_.base_bytes) {
            // A small trial that did not hold: back to the base, and wait longer before the next
            // one if it failed soon. Not a run-off from the base: its family stays.
            Shallow& shallow = shallow_of(tid);
            if (t.quiet < 2ull * shallow.quiet_needed) {
                shallow.quiet_needed = std::min(settings_.max_quiet_samples, 2 * shallow.quiet_needed);
            }
            shallow.quiet = 0;
            const StackChange change{tid, t.bytes, settings_.base_bytes, "samples ran off the small fragment"};
            threads_.erase(tid);
            ++generation_;
            return change;
        }
        const bool from_base = t.bytes <= settings_.base_bytes;
        if (!from_base || t.before_shrink != 0) t.ran_off_at = std::max(t.ran_off_at, t.bytes);
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
        t.max_kept = 0;
        ++generation_;
        if (from_base) family_ran_off(tid);   // last: it may track other threads
        return change;
    }
    if (found == threads_.end()) return judge_shallow(tid, status, fragment_bytes);
    if (status == TraceStatus::kFailed) return std::nullopt;
    Thread& t = found->second;
    ++t.quiet;
    if (t.bytes < settings_.base_bytes) return std::nullopt;   // small: stays until a sample runs off
    if (t.bytes <= settings_.base_bytes) {
        // Back at the base after a trial that held for as long again: the next episode starts afresh,
        // and its family's next thread starts at the base again.
        if (t.quiet >= 2ull * t.quiet_needed) {
            threads_.erase(found);
            ++generation_;
            if (auto family = family_of_.find(tid); family != family_of_.end()) family_deep_[family->second.family] = false;
        }
        return std::nullopt;
    }
    t.max_kept = std::max(t.max_kept, static_cast<uint32_t>(std::min<size_t>(fragment_bytes, UINT32_MAX)));
    if (t.quiet < t.quiet_needed) return std::nullopt;
    // A halving, or as far down as every quiet sample would still have fit (with the slack): a
    // thread that ran deep at its start and no longer does comes down in one trial, not three
    // (each ~1,000 samples of a 64 KB copy where 6 KB would do).
    uint32_t to = smaller(t.bytes);
    const uint64_t needed = uint64_t{t.max_kept} + settings_.shallow_slack_bytes;
    if (to <= t.ran_off_at && needed > to) {
        // Samples ran off this size before, and some of this window's would again: no trial
        // (bench/probes/Mixed.java's recursion of random depth, 100 us: a thread tried 16 KB and
        // failed, then ran off 32 KB, each time losing its deepest samples to incompleteness).
        t.quiet = 0;
        t.max_kept = 0;
        return std::nullopt;
    }
    while (to > settings_.base_bytes && needed <= ((to / 2) & ~7u)) to = smaller(to);
    const char* why = "no sample ran off the fragment for a while";
    if (to == settings_.base_bytes && has_small() && needed <= settings_.small_bytes) {
        to = settings_.small_bytes;
        why = "no sample ran off the fragment for a while, and each kept little of it";
    }
    StackChange change{tid, t.bytes, to, why};
    // A trial of more than one step that fails goes back one step, where the halving would be.
    t.before_shrink = to < smaller(t.bytes) ? smaller(t.bytes) : t.bytes;
    t.bytes = change.new_bytes;
    t.quiet = 0;
    t.max_kept = 0;
    ++generation_;
    return change;
}

StackController::Shallow& StackController::shallow_of(uint32_t tid) {
    if (shallow_.size() >= kMaxThreads && shallow_.count(tid) == 0) shallow_.clear();
    return shallow_.try_emplace(tid, Shallow{0, settings_.quiet_samples}).first->second;
}

// A thread at the base whose samples kept little of their fragments tries small_bytes.
std::optional<StackChange> StackController::judge_shallow(uint32_t tid, TraceStatus status, size_t fragment_bytes) {
    if (!has_small() || status == TraceStatus::kFailed) return std::nullopt;
    Shallow& shallow = shallow_of(tid);
    if (status == TraceStatus::kIncomplete || fragment_bytes + settings_.shallow_slack_bytes > settings_.small_bytes) {
        shallow.quiet = 0;
        return std::nullopt;
    }
    if (++shallow.quiet < shallow.quiet_needed) return std::nullopt;
    shallow.quiet = 0;
    track(tid, settings_.small_bytes);
    return StackChange{tid, settings_.base_bytes, settings_.small_bytes, "its samples kept little of the fragment"};
}

}  // namespace sf::agent
