// The CPU time the agent's code takes on the JVM's own threads (JVMTI callbacks, VMInit's start
// scan, thread registration): the part of the profiler's overhead that "agent threads CPU" misses.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>

#include "stackfrag/base/clock.hpp"

namespace sf::agent {

class CallbackCpu {
public:
    enum Kind : unsigned {
        kVmInit,            // go_live: registering the threads, the start scan, the code poller's start
        kClassPrepare,      // a class's methods announced (GetClassMethods, names, line tables)
        kCompiledMethodLoad,
        kCompiledMethodUnload,
        kDynamicCode,
        kNativeBind,        // breadcrumbs' thunks
        kThreadStart,       // the thread's own perf event opened, its ring mapped
        kThreadEnd,
        kRedefinition,      // a class about to be redefined or retransformed, noted for a recheck
        kCount
    };

    // Times one callback on the calling thread's CPU clock (a system call at each end, ~0.3 µs).
    // A callback the VM runs inside another on the same thread (GenerateEvents in VMInit's start
    // scan posts DynamicCodeGenerated and CompiledMethodLoad there) is charged to its own kind
    // only: the enclosing scope leaves that time out, so that the kinds add up to the total.
    class Scope {
    public:
        Scope(CallbackCpu& owner, Kind kind)
            : owner_(owner), kind_(kind), parent_(current()), begin_(thread_cpu_ns()) {
            current() = this;
        }
        ~Scope() {
            const uint64_t elapsed = thread_cpu_ns() - begin_;
            owner_.add(kind_, elapsed > nested_ns_ ? elapsed - nested_ns_ : 0);
            if (parent_ != nullptr) parent_->nested_ns_ += elapsed;
            current() = parent_;
        }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        static Scope*& current() {
            static thread_local Scope* innermost = nullptr;
            return innermost;
        }
        CallbackCpu& owner_;
        Kind kind_;
        Scope* parent_;
        uint64_t begin_;
        uint64_t nested_ns_ = 0;
    };

    void add(Kind kind, uint64_t ns) {
        ns_[kind].fetch_add(ns, std::memory_order_relaxed);
        calls_[kind].fetch_add(1, std::memory_order_relaxed);
    }
    uint64_t ns(Kind kind) const { return ns_[kind].load(std::memory_order_relaxed); }
    uint64_t calls(Kind kind) const { return calls_[kind].load(std::memory_order_relaxed); }
    uint64_t total_ns() const {
        uint64_t sum = 0;
        for (unsigned k = 0; k < kCount; ++k) sum += ns(static_cast<Kind>(k));
        return sum;
    }

    // "12.3 ms: VMInit 4.0 (1), class prepare 6.1 (812), ..." — kinds never called are left out.
    std::string describe() const {
        static constexpr const char* kNames[kCount] = {"VMInit",         "class prepare", "compiled method load",
                                                       "compiled method unload", "dynamic code", "native bind",
                                                       "thread start",   "thread end",    "class redefinition"};
        char buffer[96];
        std::snprintf(buffer, sizeof buffer, "%.1f ms:", static_cast<double>(total_ns()) / 1e6);
        std::string out = buffer;
        const char* separator = " ";
        for (unsigned k = 0; k < kCount; ++k) {
            const auto kind = static_cast<Kind>(k);
            if (calls(kind) == 0) continue;
            std::snprintf(buffer, sizeof buffer, "%s%s %.1f (%llu)", separator, kNames[k],
                          static_cast<double>(ns(kind)) / 1e6, static_cast<unsigned long long>(calls(kind)));
            out += buffer;
            separator = ", ";
        }
        return out;
    }

private:
    std::atomic<uint64_t> ns_[kCount]{};
    std::atomic<uint64_t> calls_[kCount]{};
};

}  // namespace sf::agent
