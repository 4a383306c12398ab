#include "native_bind.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "breadcrumb_thunks.hpp"
#include "log.hpp"

namespace sf::agent::native_bind {

namespace {

struct State {
    breadcrumbs::ThunkPool pool;
    std::mutex mutex;
    // One thunk per (function, stack slots): the JVM may bind one function to many methods, and
    // re-post a binding it already made.
    std::map<std::pair<void*, uint32_t>, void*> thunks;
    std::atomic<uint64_t> bound{0}, unchanged{0}, rebinds{0};
    std::atomic<bool> warned_signature{false}, warned_thunk{false};
};

// Never destroyed: thunks are called (and returned through) until the process ends.
State& state() {
    static State* s = new State;
    return *s;
}

void warn_once(std::atomic<bool>& flag, const std::string& text) {
    if (!flag.exchange(true)) SF_LOG_WARN("breadcrumbs: %s (logged once; such natives run without breadcrumbs)", text.c_str());
}

std::string method_text(jvmtiEnv* jvmti, jmethodID method, const char* name, const char* sig) {
    std::string text;
    jclass klass = nullptr;
    char* class_sig = nullptr;
    if (jvmti->GetMethodDeclaringClass(method, &klass) == JVMTI_ERROR_NONE &&
        jvmti->GetClassSignature(klass, &class_sig, nullptr) == JVMTI_ERROR_NONE && class_sig != nullptr) {
        text = class_sig;
        jvmti->Deallocate(reinterpret_cast<unsigned char*>(class_sig));
    }
    return text + "." + (name ? name : "?") + (sig ? sig : "");
}

}  // namespace

Status enable(jvmtiEnv* jvmti) {
    // A capability of its own, so that a JVM refusing it costs breadcrumbs, not sampling.
    jvmtiCapabilities capabilities{};
    capabilities.can_generate_native_method_bind_events = 1;
    jvmtiError error = jvmti->AddCapabilities(&capabilities);
    if (error == JVMTI_ERROR_NONE) {
        error = jvmti->SetEventNotificationMode(JVMTI_ENABLE, JVMTI_EVENT_NATIVE_METHOD_BIND, nullptr);
    }
    if (error != JVMTI_ERROR_NONE) {
        SF_LOG_WARN("breadcrumbs are off: NativeMethodBind events are not available (JVMTI error %d)",
                    static_cast<int>(error));
        return make_error(Errc::kUnsupported, "NativeMethodBind events");
    }
    return {};
}

void JNICALL on_native_method_bind(jvmtiEnv* jvmti, JNIEnv*, jthread, jmethodID method, void* address,
                                   void** new_address_ptr) {
    if (address == nullptr || new_address_ptr == nullptr) return;
    State& s = state();
    if (s.pool.contains(address)) {
        s.rebinds.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    char* name = nullptr;
    char* sig = nullptr;
    // Not in the primordial phase; those few bindings stay as they are.
    const jvmtiError error = jvmti->GetMethodName(method, &name, &sig, nullptr);
    if (error != JVMTI_ERROR_NONE || sig == nullptr) {
        s.unchanged.fetch_add(1, std::memory_order_relaxed);
        if (error != JVMTI_ERROR_WRONG_PHASE) {
            warn_once(s.warned_signature, "GetMethodName failed with JVMTI error " + std::to_string(error));
        }
        if (name) jvmti->Deallocate(reinterpret_cast<unsigned char*>(name));
        if (sig) jvmti->Deallocate(reinterpret_cast<unsigned char*>(sig));
        return;
    }
    Result<breadcrumbs::ArgShape> shape = breadcrumbs::jni_arg_shape(sig);
    void* thunk = nullptr;
    std::string failure;
    if (!shape.ok()) {
        failure = shape.error().describe();
    } else {
        const auto key = std::make_pair(address, shape->stack_slots());
        std::lock_guard<std::mutex> lock(s.mutex);
        auto found = s.thunks.find(key);
        if (found != s.thunks.end()) {
            thunk = found->second;
        } else {
            Result<void*> made = s.pool.make(address, key.second);
            if (made.ok()) {
                thunk = *made;
                s.thunks.emplace(key, thunk);
            } else {
                failure = made.error().describe();
            }
        }
    }
    if (thunk != nullptr) {
        *new_address_ptr = thunk;
        s.bound.fetch_add(1, std::memory_order_relaxed);
        if (log_enabled(LogLevel::kDebug)) {
            SF_LOG_DEBUG("breadcrumbs: %s bound through thunk %p (%u stack slots)",
                         method_text(jvmti, method, name, sig).c_str(), thunk, shape->stack_slots());
        }
    } else {
        s.unchanged.fetch_add(1, std::memory_order_relaxed);
        warn_once(s.warned_thunk, method_text(jvmti, method, name, sig) + ": " + failure);
    }
    jvmti->Deallocate(reinterpret_cast<unsigned char*>(name));
    jvmti->Deallocate(reinterpret_cast<unsigned char*>(sig));
}

Stats stats() {
    State& s = state();
    Stats out;
    out.bound = s.bound.load(std::memory_order_relaxed);
    out.unchanged = s.unchanged.load(std::memory_order_relaxed);
    out.rebinds = s.rebinds.load(std::memory_order_relaxed);
    out.thunks = s.pool.thunks();
    return out;
}

void log_summary() {
    const Stats st = stats();
    SF_LOG_INFO("breadcrumbs: %llu native bindings through %llu thunks (%zu bytes mapped), %llu left unchanged",
                static_cast<unsigned long long>(st.bound), static_cast<unsigned long long>(st.thunks),
                state().pool.bytes_mapped(), static_cast<unsigned long long>(st.unchanged));
}

}  // namespace sf::agent::native_bind
