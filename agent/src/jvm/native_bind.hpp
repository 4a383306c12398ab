// Breadcrumbs for JNI: every native method bound while the agent runs (JVMTI NativeMethodBind,
// which covers lazy linking and RegisterNatives) is rebound to a generated thunk that leaves a
// breadcrumb record on the stack and calls the real function (agent/src/core/breadcrumb_thunks.hpp).
// The decoder uses the record to get back to Java from native code it cannot unwind.
//
// How the runtime drives it (breadcrumbs=on only):
//   1. callbacks.NativeMethodBind = &on_native_method_bind in SetEventCallbacks;
//   2. enable(jvmti) after the other events: adds the capability and enables the event (a refusal
//      is logged and leaves sampling alone);
//   3. log_summary() at shutdown.
// Whenever a thunk cannot be made (signature unavailable, mapping refused), the binding is left as
// the JVM chose it and the reason is logged once: the JVM never depends on a thunk it did not get.
#pragma once

#include <jvmti.h>

#include <cstdint>

#include "stackfrag/base/result.hpp"

namespace sf::agent::native_bind {

Status enable(jvmtiEnv* jvmti);

void JNICALL on_native_method_bind(jvmtiEnv* jvmti, JNIEnv* jni, jthread thread, jmethodID method, void* address,
                                   void** new_address_ptr);

struct Stats {
    uint64_t bound = 0;        // bindings redirected to a thunk
    uint64_t thunks = 0;       // distinct thunks made (one per function and stack-argument count)
    uint64_t unchanged = 0;    // bindings left alone: no signature, bad signature, no memory
    uint64_t rebinds = 0;      // the JVM bound a thunk again (RegisterNatives of a thunk address)
};
Stats stats();
void log_summary();

}  // namespace sf::agent::native_bind
