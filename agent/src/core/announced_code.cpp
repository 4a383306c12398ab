#include "announced_code.hpp"

#include <algorithm>

namespace sf::agent {

namespace {
// Methods looked at per hold of the lock in redefined().
constexpr size_t kMethodSlice = 4096;
}  // namespace

bool AnnouncedCode::claim_method(uint64_t method_id, uint64_t method_ptr) {
    std::lock_guard lock(mutex_);
    return claim_method_locked(method_id, method_ptr);
}

void AnnouncedCode::claim_methods(const uint64_t* ids, const uint64_t* ptrs, size_t count, std::vector<bool>& claimed) {
    claimed.assign(count, false);
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < count; ++i) {
        if (ids[i] == 0 || ptrs[i] == 0) continue;
        method_index_.prefetch(ids[i]);
        id_of_method_ptr_.prefetch(ptrs[i]);
    }
    for (size_t i = 0; i < count; ++i) claimed[i] = claim_method_locked(ids[i], ptrs[i]);
}

bool AnnouncedCode::claim_method_locked(uint64_t method_id, uint64_t method_ptr) {
    if (method_id == 0 || method_ptr == 0) return false;   // neither is a method (nor a key here)
    auto [index, inserted] = method_index_.try_emplace(method_id, methods_.size());
    if (!inserted && *index == kUnclaimed) {
        *index = methods_.size();
        inserted = true;
    }
    if (inserted) {
        methods_.emplace_back(method_id, method_ptr);
    } else {
        uint64_t& announced_ptr = methods_[*index].second;
        if (announced_ptr == method_ptr) return false;
        announced_ptr = method_ptr;
    }
    id_of_method_ptr_[method_ptr] = method_id;
    return true;
}

void AnnouncedCode::unclaim_method(uint64_t method_id) {
    std::lock_guard lock(mutex_);
    size_t* found = method_index_.find(method_id);
    if (found == nullptr || *found == kUnclaimed) return;
    const size_t index = *found;
    *found = kUnclaimed;
    if (index + 1 != methods_.size()) {
        methods_[index] = methods_.back();
        *method_index_.find(methods_[index].first) = index;
    }
    methods_.pop_back();
}

size_t AnnouncedCode::unannounced_methods(const uint64_t* ids, size_t count) const {
    size_t unannounced = 0;
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < count; ++i) {
        if (ids[i] == 0) continue;
        const size_t* found = method_index_.find(ids[i]);
        unannounced += found == nullptr || *found == kUnclaimed;
    }
    return unannounced;
}

size_t AnnouncedCode::method_count() const {
    std::lock_guard lock(mutex_);
    return methods_.size();
}

uint64_t AnnouncedCode::method_id_of(uint64_t method_ptr) const {
    std::lock_guard lock(mutex_);
    const uint64_t* found = id_of_method_ptr_.find(method_ptr);
    return found == nullptr ? 0 : *found;
}

std::vector<uint64_t> AnnouncedCode::redefined(
    const std::function<std::optional<uint64_t>(uint64_t method_id)>& current) const {
    std::vector<uint64_t> changed;
    // A method unclaimed between two slices may move one from the end into the part already looked
    // at: that one waits for the next poll.
    for (size_t next = 0;;) {
        std::lock_guard lock(mutex_);
        const size_t end = std::min(methods_.size(), next + kMethodSlice);
        if (next >= end) break;
        for (; next < end; ++next) {
            const auto& [id, announced_ptr] = methods_[next];
            const std::optional<uint64_t> now = current(id);
            if (now && *now != announced_ptr) changed.push_back(id);
        }
    }
    return changed;
}

bool AnnouncedCode::claim_code(uint64_t code_begin, uint64_t method_id, bool with_scopes) {
    std::lock_guard lock(mutex_);
    auto [it, inserted] = live_code_.try_emplace(code_begin, LiveCode{method_id, with_scopes});
    if (inserted) return true;
    LiveCode& current = it->second;
    if (current.method_id == method_id) {
        if (current.with_scopes || !with_scopes) return false;
        current.with_scopes = true;
        return true;
    }
    current = LiveCode{method_id, with_scopes};
    return true;
}

void AnnouncedCode::forget_code(uint64_t code_begin, uint64_t method_id) {
    std::lock_guard lock(mutex_);
    auto it = live_code_.find(code_begin);
    if (it != live_code_.end() && it->second.method_id == method_id) live_code_.erase(it);
}

bool AnnouncedCode::code_known(uint64_t code_begin) const {
    std::lock_guard lock(mutex_);
    return live_code_.count(code_begin) != 0;
}

bool AnnouncedCode::claim_stub(uint64_t begin, uint64_t end, const std::string& name) {
    std::lock_guard lock(mutex_);
    return stubs_.emplace(begin, end, name).second;
}

bool AnnouncedCode::unannounced_at_last_poll(uint64_t code_begin) const {
    std::lock_guard lock(mutex_);
    return unannounced_last_poll_.count(code_begin) != 0;
}

void AnnouncedCode::set_unannounced_at_this_poll(std::unordered_set<uint64_t> code_begins) {
    std::lock_guard lock(mutex_);
    unannounced_last_poll_ = std::move(code_begins);
}

}  // namespace sf::agent
