// What the event stream has been told about methods and code so far, so that every CodeLoad,
// MethodInfo and Stub goes out once (and again only when it changed): the VM capture's bookkeeping,
// apart from the JVMTI calls that feed it. Thread-safe (JVMTI callbacks run on any thread).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "stackfrag/base/flat_u64_map.hpp"

namespace sf::agent {

class AnnouncedCode {
public:
    // Methods. True when (jmethodID, Method*) still needs announcing, and marks it announced: a
    // jmethodID announced with another Method* before (RedefineClasses) needs it again. False for
    // a 0 id or Method*.
    bool claim_method(uint64_t method_id, uint64_t method_ptr);
    // claim_method for each (ids[i], ptrs[i]) under one lock, the tables' lines for all of them
    // asked for before the first is looked at (a class's methods land all over tables of
    // megabytes: one cache miss after another otherwise); claimed[i] is each answer.
    void claim_methods(const uint64_t* ids, const uint64_t* ptrs, size_t count, std::vector<bool>& claimed);
    // The announcement failed after all (the method vanished): the next claim may try again.
    void unclaim_method(uint64_t method_id);
    // How many of ids[0, count) were never announced (0 ids aside): the code poll's test for a class
    // whose ClassPrepare never came.
    size_t unannounced_methods(const uint64_t* ids, size_t count) const;
    // The jmethodID last announced with this Method*, or 0.
    uint64_t method_id_of(uint64_t method_ptr) const;
    // The poll's check for redefinitions: the announced jmethodIDs whose Method* is now another
    // than the one announced, as `current` reads it (nullopt: unreadable, skipped). Goes through a
    // flat list in announcement order (a class's jmethodIDs are neighbours in the VM), holding the
    // lock for a slice of it at a time, so that callbacks wait at most for a slice. `current` must
    // not call back into this object.
    std::vector<uint64_t> redefined(const std::function<std::optional<uint64_t>(uint64_t method_id)>& current) const;
    size_t method_count() const;

    // Compiled code. True when a CodeLoad at code_begin adds something the decoder does not have:
    // new code, another method's code at a reused address, or inline scopes the first load lacked.
    bool claim_code(uint64_t code_begin, uint64_t method_id, bool with_scopes);
    // A CodeUnload: the address is free, unless other code was announced there since.
    void forget_code(uint64_t code_begin, uint64_t method_id);
    bool code_known(uint64_t code_begin) const;

    // Stubs: true the first time this (begin, end, name) is seen.
    bool claim_stub(uint64_t begin, uint64_t end, const std::string& name);

    // The CodeCache poll's nmethods that no event announced: those of the previous poll are the ones
    // whose CompiledMethodLoad had a whole poll interval to arrive.
    bool unannounced_at_last_poll(uint64_t code_begin) const;
    void set_unannounced_at_this_poll(std::unordered_set<uint64_t> code_begins);

private:
    struct LiveCode {
        uint64_t method_id = 0;
        bool with_scopes = false;
    };
    mutable std::mutex mutex_;
    // Every announced (jmethodID, Method* last announced), and where each jmethodID is in it.
    // Flat maps: the callbacks claim every method of every class prepared, tens of thousands on
    // the JVM's own threads, and an insert into them allocates nothing.
    std::vector<std::pair<uint64_t, uint64_t>> methods_;
    bool claim_method_locked(uint64_t method_id, uint64_t method_ptr);
    static constexpr size_t kUnclaimed = SIZE_MAX;   // a method_index_ entry whose claim was undone
    FlatU64Map<size_t> method_index_;
    FlatU64Map<uint64_t> id_of_method_ptr_;   // Method* -> jmethodID
    std::unordered_map<uint64_t, LiveCode> live_code_;          // code_begin -> what was announced
    std::set<std::tuple<uint64_t, uint64_t, std::string>> stubs_;
    std::unordered_set<uint64_t> unannounced_last_poll_;        // nmethod code_begin
};

}  // namespace sf::agent
