#include "stackfrag/events/events.hpp"

#include <array>
#include <type_traits>
#include <utility>

namespace sf {

namespace {
template <class T>
constexpr EventKind kind_for() {
    if constexpr (std::is_same_v<T, Sample>) return EventKind::kSample;
    else if constexpr (std::is_same_v<T, CodeLoad>) return EventKind::kCodeLoad;
    else if constexpr (std::is_same_v<T, CodeUnload>) return EventKind::kCodeUnload;
    else if constexpr (std::is_same_v<T, Stub>) return EventKind::kStub;
    else if constexpr (std::is_same_v<T, MethodInfo>) return EventKind::kMethod;
    else if constexpr (std::is_same_v<T, VmInfo>) return EventKind::kVmInfo;
    else if constexpr (std::is_same_v<T, Oracle>) return EventKind::kOracle;
    else if constexpr (std::is_same_v<T, ThreadInfo>) return EventKind::kThread;
    else if constexpr (std::is_same_v<T, Lost>) return EventKind::kLost;
    else if constexpr (std::is_same_v<T, ModuleMap>) return EventKind::kModule;
    else if constexpr (std::is_same_v<T, ProcessCpu>) return EventKind::kProcessCpu;
    else if constexpr (std::is_same_v<T, MethodBatch>) return EventKind::kMethodBatch;
    else if constexpr (std::is_same_v<T, NamedMethod>) return EventKind::kNamedMethod;
    else {
        static_assert(std::is_same_v<T, JvmtiTrace>, "every Event alternative needs a kind");
        return EventKind::kJvmtiTrace;
    }
}

template <size_t... I>
constexpr std::array<EventKind, sizeof...(I)> kinds_by_index(std::index_sequence<I...>) {
    return {kind_for<std::variant_alternative_t<I, Event>>()...};
}
}  // namespace

// By the alternative's index: the writer asks for every event it writes.
EventKind kind_of(const Event& event) {
    static constexpr auto kKinds = kinds_by_index(std::make_index_sequence<std::variant_size_v<Event>>());
    if (event.valueless_by_exception()) {
        return std::visit([](const auto& e) { return kind_for<std::decay_t<decltype(e)>>(); }, event);   // throws
    }
    return kKinds[event.index()];
}

const char* thread_kind_name(ThreadKind kind) {
    switch (kind) {
        case ThreadKind::kJava: return "java";
        case ThreadKind::kGc: return "gc";
        case ThreadKind::kCompiler: return "compiler";
        case ThreadKind::kVm: return "vm";
        case ThreadKind::kOther: return "other";
        case ThreadKind::kProfiler: return "profiler";
    }
    return "other";
}

const char* kind_name(EventKind kind) {
    switch (kind) {
        case EventKind::kSample: return "sample";
        case EventKind::kCodeLoad: return "code_load";
        case EventKind::kCodeUnload: return "code_unload";
        case EventKind::kStub: return "stub";
        case EventKind::kMethod: return "method";
        case EventKind::kVmInfo: return "vm_info";
        case EventKind::kOracle: return "oracle";
        case EventKind::kThread: return "thread";
        case EventKind::kLost: return "lost";
        case EventKind::kModule: return "module";
        case EventKind::kJvmtiTrace: return "jvmti_trace";
        case EventKind::kProcessCpu: return "process_cpu";
        case EventKind::kMethodBatch: return "method_batch";
        case EventKind::kNamedMethod: return "named_method";
    }
    return "unknown";
}

uint64_t time_of(const Event& event) {
    return std::visit(
        [](const auto& e) -> uint64_t {
            if constexpr (std::is_same_v<std::decay_t<decltype(e)>, Oracle>) return e.sample.time_ns;
            else return e.time_ns;
        },
        event);
}

}  // namespace sf
