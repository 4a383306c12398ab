// How the profile module learns Java method names and line tables: the MethodNames interface
// (the decoder's CodeMap may implement it) and MethodTable, a plain map fed by MethodInfo events.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "stackfrag/events/events.hpp"

namespace sf::profile {

// Resolves a jmethodID to what the JVM announced about it. Implementations must keep the returned
// MethodInfo alive and unchanged for as long as the Cct that uses them adds traces.
class MethodNames {
public:
    virtual ~MethodNames() = default;
    // nullptr when the method was never announced.
    virtual const MethodInfo* find(uint64_t method_id) const = 0;
};

// The simplest MethodNames: the latest MethodInfo per method id, for tools and tests that read a
// recording without the decoder.
class MethodTable final : public MethodNames {
public:
    // A later MethodInfo for the same id replaces the earlier one (a redefined method keeps its id).
    void add(const MethodInfo& info);
    const MethodInfo* find(uint64_t method_id) const override;
    size_t size() const { return methods_.size(); }

private:
    std::unordered_map<uint64_t, MethodInfo> methods_;
};

// The source line of `bci` from the method's line table (the entry with the largest start_bci not
// after it); 0 when the bci is negative or the table is empty, as 0 is "no line" in every output.
int32_t line_for_bci(const MethodInfo& method, int32_t bci);

// The smallest line of the table (where pprof's start_line points), 0 when there is none.
int32_t first_line(const MethodInfo& method);

}  // namespace sf::profile
