// The VM's code map as events: compiled methods, stubs, the interpreter, methods and VM facts,
// read from JVMTI and HotSpot's exported VMStructs while the objects are alive.
#pragma once

#include <jvmti.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "event_sink.hpp"
#include "stackfrag/base/result.hpp"

namespace sf::agent {

// What the runtime decided about sampling; copied into VmInfo.
struct SamplingParameters {
    uint32_t sample_stack_bytes = 0;
    uint64_t sample_period_ns = 0;
    uint32_t max_frames = 0;   // depth=
    // The VmInfo's time when not now: sampling began before VMInit (the VM's layout and the
    // period hold from the agent's load on), and the samples taken since must come after it.
    uint64_t valid_from_ns = 0;
};

// Owns the VMStructs resolution and turns JVMTI callbacks into CodeLoad / CodeUnload / Stub /
// MethodInfo / VmInfo events. The agent runtime (agent_entry.cpp) owns the jvmtiEventCallbacks
// struct and forwards the relevant callbacks here.
//
// How the runtime drives it:
//   1. Agent_OnLoad/OnAttach: VmCapture::add_capabilities(caps) before AddCapabilities; construct.
//   2. Enable (SetEventNotificationMode) CLASS_PREPARE, COMPILED_METHOD_LOAD,
//      COMPILED_METHOD_UNLOAD and DYNAMIC_CODE_GENERATED, and forward them to the on_* methods.
//      Callbacks that arrive before start() are ignored: start() replays everything still alive.
//   3. At VMInit (OnLoad) or right away (OnAttach, live phase): start(jni, params), or begin() and
//      scan() with sampling started in between. It emits VmInfo first, then the code map; on error, log error().describe() and disable the agent (the
//      JVM runs on; no VmCapture event has been emitted).
//   4. From an agent thread, every 100 ms - 5 s: poll(jni). It re-announces methods whose
//      jmethodID now points to a new Method* (RedefineClasses / RetransformClasses) and walks the
//      CodeCache for nmethods no CompiledMethodLoad announced.
//   5. Never destroy it while callbacks may still run (keep it alive until the VM is dead).
class VmCapture {
public:
    // Capabilities VmCapture needs; the runtime adds them before enabling events:
    // can_generate_compiled_method_load_events, can_get_source_file_name, can_get_line_numbers.
    static void add_capabilities(jvmtiCapabilities& caps);
    // can_retransform_classes, where the VM offers it, for no use of its own: only an environment
    // that has it is told (ClassFileLoadHook) of RetransformClasses, which is how JFR and Java
    // agents instrument loaded classes. False when not added (redefinitions are still told, and
    // poll() finds retransformed classes later).
    static bool add_retransform_notice(jvmtiEnv* jvmti);

    VmCapture(jvmtiEnv* jvmti, EventSink& sink);
    ~VmCapture();
    VmCapture(const VmCapture&) = delete;
    VmCapture& operator=(const VmCapture&) = delete;

    // Resolve VMStructs, emit VmInfo, walk the CodeCache (Stub for every non-nmethod blob), announce
    // every method of every prepared class, then GenerateEvents for dynamic code and compiled code.
    // Must run in the live phase on a thread attached to the VM (jni valid).
    Status start(JNIEnv* jni, const SamplingParameters& params);
    // start() in two steps, so that sampling can begin in between and see the scan's CPU time:
    // begin() resolves VMStructs and emits VmInfo (cheap; callbacks are taken from then on);
    // scan() announces the code map and the loaded methods (tens of ms of the calling thread),
    // every event stamped when it begins. scan() only after a begin() that succeeded.
    Status begin(JNIEnv* jni, const SamplingParameters& params);
    void scan(JNIEnv* jni);

    void on_class_prepare(JNIEnv* jni, jthread thread, jclass klass);
    void on_compiled_method_load(jmethodID method, jint code_size, const void* code_addr,
                                 jint map_length, const jvmtiAddrLocationMap* map,
                                 const void* compile_info);
    void on_compiled_method_unload(jmethodID method, const void* code_addr);
    void on_dynamic_code_generated(const char* name, const void* address, jint length);

    // ClassFileLoadHook with a class being redefined or retransformed (any thread, before the
    // VM replaces its methods): the class is looked at again by recheck_redefinitions().
    void on_class_redefining(JNIEnv* jni, jclass class_being_redefined);
    // From an agent thread, soon after on_class_redefining: announces the new Method*s of the
    // classes whose redefinition has happened since; returns how many classes still wait for theirs
    // (call again in a few ms). One that has not changed after kRedefinitionWait is left to poll().
    size_t recheck_redefinitions(JNIEnv* jni);
    static constexpr std::chrono::milliseconds kRedefinitionWait{2000};

    // Periodic work from an agent thread (see step 4 above). Cheap when nothing changed.
    void poll(JNIEnv* jni);
    // What the polls have found so far: redefined methods and nmethods no event announced.
    uint64_t poll_findings() const;

    // Announces the method unless it already was, as of `time_ns` (mode=jvmti: a stack trace may
    // name methods of hidden classes, which no ClassPrepare announced).
    void announce_method(JNIEnv* jni, jmethodID method, uint64_t time_ns);

    // Lazy names (before begin()): methods are announced in MethodBatch events without names, one
    // per class, and named on request (name_methods); otherwise each in a MethodInfo with its names.
    void set_lazy_names(bool lazy);
    // Whether the run began with lazy names (also after names_of gave them up for churning classes).
    bool lazy_names() const;
    // Emits a NamedMethod for each id (resolved = false where the JVM no longer knows the method).
    // On a thread attached to the VM; ids are jmethodIDs this capture announced.
    void name_methods(JNIEnv* jni, const std::vector<uint64_t>& method_ids);
    // The same events, returned instead of emitted (the stop, once the stream is closed).
    std::vector<NamedMethod> names_of(JNIEnv* jni, const std::vector<uint64_t>& method_ids);

    // With lazy names: how many methods were announced, named, and no longer known when asked.
    std::string names_text() const;
    // Redefinitions seen so far, for the log at the stop; empty when there were none.
    std::string redefinitions_text() const;
    // Whether this VM prepares classes without a ClassPrepare (JdkFacts::class_prepare_missed_on_carrier).
    bool misses_class_prepares() const;
    // On such a VM, announces the loaded classes none of whose methods was announced (~3 us a
    // class: 5,300 classes take 17 ms); returns how many. One thread, attached to the VM.
    size_t announce_unprepared_classes(JNIEnv* jni);
    // The classes the code poll announced because no ClassPrepare had (empty when none).
    std::string unannounced_classes_text() const;
    // A one-line description of the resolved layout and the counts so far, for the log.
    std::string describe() const;
    // The CodeCache's reserved range [low, high) once started, else {0, 0}.
    std::pair<uint64_t, uint64_t> code_cache() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace sf::agent
