// The VM's code map as events: compiled methods, stubs, the interpreter, methods and VM facts,
// read from JVMTI and HotSpot's exported VMStructs while the objects are alive.
#pragma once

#include <jvmti.h>

#include <string>

#include "event_sink.hpp"
#include "stackfrag/base/result.hpp"

namespace sf::agent {

// Owns the VMStructs resolution and turns JVMTI callbacks into CodeLoad / CodeUnload / Stub /
// MethodInfo / VmInfo events. The agent runtime (agent_entry.cpp) owns the jvmtiEventCallbacks
// struct and forwards the relevant callbacks here.
class VmCapture {
public:
    // Capabilities VmCapture needs; the runtime adds them before enabling events.
    static void add_capabilities(jvmtiCapabilities& caps);

    VmCapture(jvmtiEnv* jvmti, EventSink& sink);

    // At VMInit (or at attach, in the live phase): resolve VMStructs, emit VmInfo, announce every
    // method of every loaded class, then GenerateEvents for compiled code and dynamic code.
    // An error means a needed VMStructs entry is missing: the agent logs it and disables itself.
    Status start(JNIEnv* jni);

    void on_class_prepare(JNIEnv* jni, jthread thread, jclass klass);
    void on_compiled_method_load(jmethodID method, jint code_size, const void* code_addr,
                                 jint map_length, const jvmtiAddrLocationMap* map,
                                 const void* compile_info);
    void on_compiled_method_unload(jmethodID method, const void* code_addr);
    void on_dynamic_code_generated(const char* name, const void* address, jint length);

    // A one-line description of the resolved layout, for the log.
    std::string describe() const;

private:
    struct Impl;
    Impl* impl_;
};

}  // namespace sf::agent
