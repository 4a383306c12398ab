#include "announced_code.hpp"

namespace sf::agent {

bool AnnouncedCode::claim_method(uint64_t method_id, uint64_t method_ptr) {
    std::lock_guard lock(mutex_);
    auto [it, inserted] = method_ptr_of_id_.try_emplace(method_id, method_ptr);
    if (!inserted) {
        if (it->second == method_ptr) return false;
        it->second = method_ptr;
    }
    id_of_method_ptr_[method_ptr] = method_id;
    return true;
}

void AnnouncedCode::unclaim_method(uint64_t method_id) {
    std::lock_guard lock(mutex_);
    method_ptr_of_id_.erase(method_id);
}

uint64_t AnnouncedCode::method_id_of(uint64_t method_ptr) const {
    std::lock_guard lock(mutex_);
    auto it = id_of_method_ptr_.find(method_ptr);
    return it == id_of_method_ptr_.end() ? 0 : it->second;
}

std::vector<std::pair<uint64_t, uint64_t>> AnnouncedCode::methods() const {
    std::lock_guard lock(mutex_);
    return {method_ptr_of_id_.begin(), method_ptr_of_id_.end()};
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
