#include "stackfrag/profile/method_names.hpp"

#include <algorithm>

namespace sf::profile {

void MethodTable::add(const MethodInfo& info) { methods_[info.method_id] = info; }

const MethodInfo* MethodTable::find(uint64_t method_id) const {
    auto it = methods_.find(method_id);
    return it == methods_.end() ? nullptr : &it->second;
}

int32_t line_for_bci(const MethodInfo& method, int32_t bci) {
    if (bci < 0 || method.lines.empty()) {
        return 0;
    }
    // The table is documented sorted by start_bci; upper_bound finds the first entry after bci.
    auto after = std::upper_bound(method.lines.begin(), method.lines.end(), bci,
                                  [](int32_t value, const LineEntry& e) { return value < e.start_bci; });
    if (after == method.lines.begin()) {
        return 0;
    }
    return std::prev(after)->line;
}

int32_t first_line(const MethodInfo& method) {
    int32_t smallest = 0;
    for (const auto& entry : method.lines) {
        if (entry.line > 0 && (smallest == 0 || entry.line < smallest)) {
            smallest = entry.line;
        }
    }
    return smallest;
}

}  // namespace sf::profile
