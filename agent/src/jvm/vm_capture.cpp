#include "vm_capture.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "announced_code.hpp"
#include "log.hpp"
#include "code_cache_reader.hpp"
#include "stackfrag/base/clock.hpp"
#include "vm_code_map.hpp"
#include "vmstructs.hpp"

namespace sf::agent {
namespace {


// Sanity bound: no real blob is anywhere near this.
constexpr uint64_t kMaxBlobBytes = 64ull << 20;

std::string jvmti_string(jvmtiEnv* jvmti, char* s) {
    if (s == nullptr) return {};
    std::string out(s);
    jvmti->Deallocate(reinterpret_cast<unsigned char*>(s));
    return out;
}

std::string internal_class_name(std::string signature) {
    if (signature.size() >= 2 && signature.front() == 'L' && signature.back() == ';') {
        return signature.substr(1, signature.size() - 2);
    }
    return signature;
}

struct ClassFacts {
    std::string class_name;
    std::string source_file;
};

}  // namespace

struct VmCapture::Impl {
    jvmtiEnv* jvmti;
    EventSink& sink;
    JavaVM* java_vm = nullptr;
    std::unique_ptr<CodeCacheReader> code_cache;   // created by start(), before `started`
    std::atomic<bool> started{false};
    VmInfo info;   // written once by start() before `started`

    AnnouncedCode announced;   // what the stream has been told
    // Methods go out as MethodBatch entries without names; name_methods() names those asked for.
    std::atomic<bool> lazy_names{false};
    std::atomic<bool> lazy_names_given_up{false};   // classes churned: eager again (see names_of)

    struct Counters {
        std::atomic<uint64_t> methods{0};
        std::atomic<uint64_t> methods_named{0};
        std::atomic<uint64_t> names_unresolved{0};
        std::atomic<uint64_t> method_failures{0};
        std::atomic<uint64_t> code_loads{0};
        std::atomic<uint64_t> code_loads_from_walk{0};
        std::atomic<uint64_t> code_loads_blob_missing{0};
        std::atomic<uint64_t> code_unloads{0};
        std::atomic<uint64_t> stubs{0};
        std::atomic<uint64_t> walk_unresolved_method{0};
        std::atomic<uint64_t> redefined_methods{0};
        std::atomic<uint64_t> classes_from_poll{0};          // prepared with no ClassPrepare seen
        std::atomic<uint64_t> methods_from_poll{0};
        std::atomic<uint64_t> classes_redefined{0};          // ClassFileLoadHooks with a class being redefined
        std::atomic<uint64_t> redefinitions_unseen{0};       // of those, no new Method* in kRedefinitionWait
        std::atomic<uint64_t> scopes{0};
        std::atomic<uint64_t> pcs_outside_code{0};
    } counters;
    std::atomic<uint64_t> start_scan_ns{0};
    uint64_t valid_from_ns = 0;   // SamplingParameters::valid_from_ns

    // The scan's code: nmethods the code cache held when the scan began, and the scan's time for
    // them. What GenerateEvents and the scan's own walk then announce on the scanning thread existed
    // all along and goes out stamped with that time, as the scan's stubs and classes do; otherwise
    // the samples taken during the scan (samples run from its start: hundreds of ms on an attach)
    // met no code there. Code compiled during the scan is not in the set and keeps its own time.
    std::unordered_set<uint64_t> present_at_scan;       // written before scanning_tid, read on it
    std::atomic<uint32_t> scanning_tid{0};
    uint64_t scan_valid_from = 0;

    // When a CodeLoad found now began to hold: the scan's time for code present since it began.
    uint64_t code_time(uint64_t code_begin, uint64_t now) const {
        const uint32_t scanning = scanning_tid.load(std::memory_order_acquire);
        if (scanning != 0 && scanning == static_cast<uint32_t>(gettid()) && present_at_scan.count(code_begin) != 0) {
            return scan_valid_from;
        }
        return now;
    }

    Impl(jvmtiEnv* j, EventSink& s) : jvmti(j), sink(s) {}

    // A read of VM memory that failed or gave implausible values: skipped and counted.
    void note_bad_read(int line) { code_cache->note_bad_read(line); }

    // ---- VM facts ------------------------------------------------------------------------
    std::string system_property(const char* name) {
        char* value = nullptr;
        if (jvmti->GetSystemProperty(name, &value) != JVMTI_ERROR_NONE) return {};
        return jvmti_string(jvmti, value);
    }

    Status read_vm_info(const SamplingParameters& params) {
        info.time_ns = params.valid_from_ns != 0 ? params.valid_from_ns : monotonic_ns();
        info.pid = static_cast<uint32_t>(getpid());
        info.vm_version = system_property("java.vm.version");
        // java.specification.version is set by the class library later; the VM's own is there at VMInit.
        std::string spec = system_property("java.vm.specification.version");
        if (spec.empty()) spec = info.vm_version;
        info.jdk_major = spec.rfind("1.", 0) == 0 ? std::atoi(spec.c_str() + 2) : std::atoi(spec.c_str());
        info.sample_stack_bytes = params.sample_stack_bytes;
        info.sample_period_ns = params.sample_period_ns;
        info.max_frames = params.max_frames;

        auto tables = vm::shared_tables();
        if (!tables) return tables.error();
        auto resolved = vm::resolve_layout(**tables, info.jdk_major);
        if (!resolved) return resolved.error();
        // The row's family is its release number, which is what VmLayout's values are.
        info.layout = resolved->layout_guessed ? VmLayout::kUnknown : static_cast<VmLayout>(resolved->facts->family);
        code_cache = std::make_unique<CodeCacheReader>(vm::process_memory(), std::move(resolved).value());
        return code_cache->read_vm(info);
    }

    // ---- Methods --------------------------------------------------------------------------
    JNIEnv* current_jni() const {
        JNIEnv* env = nullptr;
        if (java_vm == nullptr || java_vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_6) != JNI_OK) {
            return nullptr;
        }
        return env;
    }

    std::optional<uint64_t> method_ptr_of(jmethodID id) const {
        // jmethodIDs are Method** on 17 and 25 (hotspot-frames.md §e), handed out by JVMTI and kept
        // in JNIMethodBlocks that HotSpot never frees, so a plain load is safe; a cleared id (class
        // unloaded) reads as 0 or a small sentinel.
        if (id == nullptr) return std::nullopt;
        uint64_t ptr = __atomic_load_n(reinterpret_cast<const uint64_t*>(id), __ATOMIC_RELAXED);
        if (ptr < 4096 || (ptr & 7) != 0) return std::nullopt;
        return ptr;
    }

    ClassFacts class_facts(jclass klass) {
        ClassFacts facts;
        char* signature = nullptr;
        if (jvmti->GetClassSignature(klass, &signature, nullptr) == JVMTI_ERROR_NONE) {
            facts.class_name = internal_class_name(jvmti_string(jvmti, signature));
        }
        char* source = nullptr;
        if (jvmti->GetSourceFileName(klass, &source) == JVMTI_ERROR_NONE) {
            facts.source_file = jvmti_string(jvmti, source);
        }
        return facts;
    }

    // Reads everything about one method; false if it vanished (unloaded) or is unreadable.
    // `known`: the method's bytecodes, read with its class's (else read here).
    bool build_method_info(jmethodID id, uint64_t method_ptr, const ClassFacts& facts, uint64_t time_ns,
                           MethodInfo& out, const std::optional<CodeCacheReader::Bytecodes>* known = nullptr) {
        out.time_ns = time_ns;
        out.method_id = reinterpret_cast<uint64_t>(id);
        out.method_ptr = method_ptr;
        out.class_name = facts.class_name;
        out.source_file = facts.source_file;
        jint modifiers = 0;
        if (jvmti->GetMethodModifiers(id, &modifiers) == JVMTI_ERROR_NONE) {
            out.access_flags = static_cast<uint32_t>(modifiers);
        }
        if (!read_names(id, modifiers, out.name, out.signature, out.lines)) return false;
        fill_bytecodes(method_ptr, known, out.bytecode_begin, out.bytecode_size);
        return true;
    }

    void fill_bytecodes(uint64_t method_ptr, const std::optional<CodeCacheReader::Bytecodes>* known, uint64_t& begin,
                        uint32_t& size) {
        if (auto bytecodes = known != nullptr ? *known : code_cache->bytecodes(method_ptr)) {
            begin = bytecodes->begin;
            size = bytecodes->size;
        } else {
            note_bad_read(__LINE__);
        }
    }

    // The method's name, signature and line table; false if JVMTI no longer knows the method.
    bool read_names(jmethodID id, jint modifiers, std::string& name_out, std::string& signature_out,
                    std::vector<LineEntry>& lines) {
        char* name = nullptr;
        char* signature = nullptr;
        if (jvmti->GetMethodName(id, &name, &signature, nullptr) != JVMTI_ERROR_NONE) return false;
        name_out = jvmti_string(jvmti, name);
        signature_out = jvmti_string(jvmti, signature);
        // Native and abstract methods have no line table (JVMTI answers NATIVE_METHOD or
        // ABSENT_INFORMATION): not asked.
        constexpr jint kNoBytecodes = 0x0100 | 0x0400;   // ACC_NATIVE | ACC_ABSTRACT
        jint entry_count = 0;
        jvmtiLineNumberEntry* table = nullptr;
        if ((modifiers & kNoBytecodes) == 0 &&
            jvmti->GetLineNumberTable(id, &entry_count, &table) == JVMTI_ERROR_NONE && table != nullptr) {
            lines.reserve(static_cast<size_t>(entry_count));
            for (jint i = 0; i < entry_count; ++i) {
                lines.push_back(LineEntry{static_cast<int32_t>(table[i].start_location), table[i].line_number});
            }
            jvmti->Deallocate(reinterpret_cast<unsigned char*>(table));
            const auto by_bci = [](const LineEntry& a, const LineEntry& b) { return a.start_bci < b.start_bci; };
            if (!std::is_sorted(lines.begin(), lines.end(), by_bci)) std::stable_sort(lines.begin(), lines.end(), by_bci);
        }
        return true;
    }

    // Classes that are unloaded before a profile's request for their methods' names arrives (code
    // generated into throw-away class loaders: scripting engines, proxies) leave those frames
    // unnamed. Past a few such methods, every class prepared from then on is announced with its
    // names again, as a recording's are.
    void give_up_lazy_names_if_classes_churn() {
        constexpr uint64_t kUnresolvedBeforeEager = 16;
        if (counters.names_unresolved.load() < kUnresolvedBeforeEager || !lazy_names.load()) return;
        if (lazy_names.exchange(false)) {
            SF_LOG_INFO("%llu methods' classes were unloaded before their names could be read: every method is "
                        "named at its class's preparation from now on",
                        static_cast<unsigned long long>(counters.names_unresolved.load()));
            lazy_names_given_up.store(true);
        }
    }

    // What a MethodBatch says about a method (lazy names).
    MethodEntry method_entry(jmethodID id, uint64_t method_ptr, const std::optional<CodeCacheReader::Bytecodes>* known) {
        MethodEntry entry;
        entry.method_id = reinterpret_cast<uint64_t>(id);
        entry.method_ptr = method_ptr;
        jint modifiers = 0;
        if (jvmti->GetMethodModifiers(id, &modifiers) == JVMTI_ERROR_NONE) entry.access_flags = static_cast<uint32_t>(modifiers);
        fill_bytecodes(method_ptr, known, entry.bytecode_begin, entry.bytecode_size);
        return entry;
    }

    // The names of methods announced before; one NamedMethod each, resolved or not.
    std::vector<NamedMethod> names_of(JNIEnv* jni, const std::vector<uint64_t>& ids) {
        if (jni == nullptr) jni = current_jni();
        std::vector<NamedMethod> out;
        out.reserve(ids.size());
        const uint64_t now = monotonic_ns();
        // By Method*: a class's methods lie together in metaspace, so a class's run of methods asks
        // the JVM for the class's name and source file once (IsSameObject with the previous one).
        std::vector<std::pair<uint64_t, uint64_t>> by_ptr;   // (Method*, jmethodID); Method* 0: cleared
        by_ptr.reserve(ids.size());
        for (uint64_t raw : ids) by_ptr.emplace_back(method_ptr_of(reinterpret_cast<jmethodID>(raw)).value_or(0), raw);
        std::sort(by_ptr.begin(), by_ptr.end());
        jclass last_class = nullptr;
        ClassFacts last_facts;
        for (const auto& [ptr, raw] : by_ptr) {
            const auto id = reinterpret_cast<jmethodID>(raw);
            NamedMethod named;
            named.time_ns = now;
            named.method_id = raw;
            // A cleared jmethodID (class unloaded) is not handed to JVMTI at all.
            jint modifiers = 0;
            jclass klass = nullptr;
            if (ptr != 0 && jvmti->GetMethodModifiers(id, &modifiers) == JVMTI_ERROR_NONE &&
                read_names(id, modifiers, named.name, named.signature, named.lines)) {
                if (jvmti->GetMethodDeclaringClass(id, &klass) == JVMTI_ERROR_NONE && klass != nullptr) {
                    if (jni == nullptr || last_class == nullptr || !jni->IsSameObject(klass, last_class)) {
                        last_facts = class_facts(klass);
                        if (jni != nullptr) {
                            if (last_class != nullptr) jni->DeleteLocalRef(last_class);
                            last_class = klass;
                            klass = nullptr;
                        }
                    }
                    named.class_name = last_facts.class_name;
                    named.source_file = last_facts.source_file;
                    if (jni != nullptr && klass != nullptr) jni->DeleteLocalRef(klass);
                }
                named.resolved = true;
                counters.methods_named++;
            } else {
                named = NamedMethod{now, raw, false, {}, {}, {}, {}, {}};
                counters.names_unresolved++;
            }
            out.push_back(std::move(named));
        }
        if (jni != nullptr && last_class != nullptr) jni->DeleteLocalRef(last_class);
        give_up_lazy_names_if_classes_churn();
        return out;
    }

    // Announces a method known only by its jmethodID (inline records, CompiledMethodLoad).
    void announce_method(JNIEnv* jni, jmethodID id, uint64_t time_ns) {
        if (lazy_names.load(std::memory_order_relaxed)) return announce_methods_nameless({id}, time_ns);
        auto ptr = method_ptr_of(id);
        if (!ptr) {
            counters.method_failures++;
            return;
        }
        if (!announced.claim_method(reinterpret_cast<uint64_t>(id), *ptr)) return;
        ClassFacts facts;
        jclass klass = nullptr;
        if (jvmti->GetMethodDeclaringClass(id, &klass) == JVMTI_ERROR_NONE && klass != nullptr) {
            facts = class_facts(klass);
            if (jni != nullptr) jni->DeleteLocalRef(klass);
        }
        MethodInfo method;
        if (!build_method_info(id, *ptr, facts, time_ns, method)) {
            announced.unclaim_method(reinterpret_cast<uint64_t>(id));
            counters.method_failures++;
            return;
        }
        counters.methods++;
        sink.emit(std::move(method));
    }

    // Those of `ids` that still need announcing, claimed now in one batch, appended to `fresh` with
    // their Method*s in `ptrs`; an id without a Method* counts as a failure.
    void claim_fresh(const jmethodID* ids, size_t count, std::vector<jmethodID>& fresh, std::vector<uint64_t>& ptrs) {
        std::vector<uint64_t> raw(count), all_ptrs(count);
        for (size_t i = 0; i < count; ++i) {
            auto ptr = method_ptr_of(ids[i]);
            if (!ptr) counters.method_failures++;
            raw[i] = reinterpret_cast<uint64_t>(ids[i]);
            all_ptrs[i] = ptr.value_or(0);   // 0: never claimed
        }
        std::vector<bool> claimed;
        announced.claim_methods(raw.data(), all_ptrs.data(), count, claimed);
        for (size_t i = 0; i < count; ++i) {
            if (!claimed[i]) continue;
            fresh.push_back(ids[i]);
            ptrs.push_back(all_ptrs[i]);
        }
    }

    // Those of `ids` not announced yet, in one MethodBatch.
    void announce_methods_nameless(const std::vector<jmethodID>& ids, uint64_t time_ns) {
        MethodBatch batch{time_ns, {}};
        std::vector<jmethodID> fresh;
        std::vector<uint64_t> ptrs;
        claim_fresh(ids.data(), ids.size(), fresh, ptrs);
        for (size_t i = 0; i < fresh.size(); ++i) batch.methods.push_back(method_entry(fresh[i], ptrs[i], nullptr));
        if (batch.methods.empty()) return;
        counters.methods += batch.methods.size();
        sink.emit(std::move(batch));
    }

    // The class's methods not announced yet, or announced with another Method* (a redefinition):
    // returns how many it claimed.
    size_t announce_class(jclass klass, uint64_t time_ns) {
        jint status = 0;
        if (jvmti->GetClassStatus(klass, &status) != JVMTI_ERROR_NONE ||
            (status & JVMTI_CLASS_STATUS_PREPARED) == 0 ||
            (status & (JVMTI_CLASS_STATUS_ARRAY | JVMTI_CLASS_STATUS_PRIMITIVE)) != 0) {
            return 0;
        }
        jint count = 0;
        jmethodID* methods = nullptr;
        if (jvmti->GetClassMethods(klass, &count, &methods) != JVMTI_ERROR_NONE || methods == nullptr) {
            return 0;
        }
        // The methods this class announces, then their bytecodes in two batched reads of VM
        // memory (two system calls per method before: ~2.8 of the ~8 us each took on a JVM thread).
        std::vector<jmethodID> claimed;
        std::vector<uint64_t> ptrs;
        claim_fresh(methods, static_cast<size_t>(count), claimed, ptrs);
        jvmti->Deallocate(reinterpret_cast<unsigned char*>(methods));
        if (claimed.empty()) return 0;
        // The code sizes from JVMTI (the last bytecode's index + 1; -1 for a native method), so that
        // only the ConstMethod pointers are read from VM memory.
        std::vector<std::optional<uint32_t>> code_sizes(claimed.size());
        for (size_t i = 0; i < claimed.size(); ++i) {
            jlocation start = 0, end = 0;
            if (jvmti->GetMethodLocation(claimed[i], &start, &end) == JVMTI_ERROR_NONE && end >= -1 && end < INT32_MAX) {
                code_sizes[i] = static_cast<uint32_t>(end + 1);
            }
        }
        // `klass` is a reference the JVM holds for us (ClassPrepare's, or GetLoadedClasses' local
        // one): the class and its Methods stay loaded until we return.
        const std::vector<std::optional<CodeCacheReader::Bytecodes>> bytecodes =
            code_cache->bytecodes_of(ptrs, &code_sizes, /*methods_alive=*/true);
        if (lazy_names.load(std::memory_order_relaxed)) {
            // One event for the class, no names: a profile names only the methods it refers to.
            MethodBatch batch{time_ns, {}};
            batch.methods.reserve(claimed.size());
            for (size_t i = 0; i < claimed.size(); ++i) {
                MethodEntry entry = method_entry(claimed[i], ptrs[i], &bytecodes[i]);
                // An abstract method never runs, so no stack holds it (interfaces have many).
                constexpr uint32_t kAbstract = 0x0400;
                if ((entry.access_flags & kAbstract) == 0) batch.methods.push_back(entry);
            }
            counters.methods += batch.methods.size();
            if (!batch.methods.empty()) sink.emit(std::move(batch));
            return claimed.size();
        }
        const ClassFacts facts = class_facts(klass);
        for (size_t i = 0; i < claimed.size(); ++i) {
            MethodInfo method;
            if (!build_method_info(claimed[i], ptrs[i], facts, time_ns, method, &bytecodes[i])) {
                announced.unclaim_method(reinterpret_cast<uint64_t>(claimed[i]));
                counters.method_failures++;
                continue;
            }
            counters.methods++;
            sink.emit(std::move(method));
        }
        return claimed.size();
    }

    // The loaded classes with methods no event announced (JdkFacts::class_prepare_missed_on_carrier):
    // on JDK 21 the unparker's ThreadPoolExecutor$Worker is prepared while a virtual thread runs on
    // its carrier's stack, and its run() then stood in every interpreted stack of the unparker's
    // thread as an unknown Method* (the VT probe on 21.0.13: 7 % of all samples failed). The test
    // per class is a JVMTI call and a lookup per method; a class is announced as a ClassPrepare would,
    // stamped with the previous check's time: it was not prepared yet then (or that check, or the
    // start scan, would have found it), and samples since may have run its methods. Such an event
    // is older than others already passed on, so it reaches the stream behind them: the decoders'
    // second decode of a failed sample (StreamDecoderOptions::retry_ns) then finds the methods.
    // Code-poll thread only. Returns the classes found.
    size_t announce_unannounced_classes(JNIEnv* jni) {
        const uint64_t begin = monotonic_ns();
        const uint64_t time_ns = std::exchange(class_check_from_ns, begin);
        const uint64_t found_before = counters.classes_from_poll.load();
        std::vector<uint64_t> ids;
        const size_t count = for_each_loaded_class(jni, [&](jclass klass) {
            jint status = 0, method_count = 0;
            jmethodID* methods = nullptr;
            if (jvmti->GetClassStatus(klass, &status) != JVMTI_ERROR_NONE || (status & JVMTI_CLASS_STATUS_PREPARED) == 0 ||
                (status & (JVMTI_CLASS_STATUS_ARRAY | JVMTI_CLASS_STATUS_PRIMITIVE)) != 0 ||
                jvmti->GetClassMethods(klass, &method_count, &methods) != JVMTI_ERROR_NONE || methods == nullptr) {
                return;
            }
            ids.assign(method_count, 0);
            for (jint k = 0; k < method_count; ++k) ids[k] = reinterpret_cast<uint64_t>(methods[k]);
            jvmti->Deallocate(reinterpret_cast<unsigned char*>(methods));
            if (announced.unannounced_methods(ids.data(), ids.size()) == 0) return;
            if (const size_t claimed = announce_class(klass, time_ns); claimed != 0) {
                counters.classes_from_poll++;
                counters.methods_from_poll += claimed;
                SF_LOG_DEBUG("class check: %s had no ClassPrepare (%zu methods)", class_facts(klass).class_name.c_str(), claimed);
            }
        });
        const uint64_t found = counters.classes_from_poll.load() - found_before;
        SF_LOG_DEBUG("class check: %zu classes in %.2f ms, %llu announced with no ClassPrepare", count,
                     static_cast<double>(monotonic_ns() - begin) / 1e6, static_cast<unsigned long long>(found));
        return static_cast<size_t>(found);
    }
    uint64_t class_check_from_ns = 0;   // announce_unannounced_classes: when the previous check began

    void announce_loaded_classes(JNIEnv* jni, uint64_t time_ns) {
        for_each_loaded_class(jni, [&](jclass klass) { announce_class(klass, time_ns); });
    }

    // `each` on every loaded class, each a local reference freed after the call; returns how many.
    template <class Each>
    size_t for_each_loaded_class(JNIEnv* jni, Each&& each) {
        jint count = 0;
        jclass* classes = nullptr;
        if (jvmti->GetLoadedClasses(&count, &classes) != JVMTI_ERROR_NONE || classes == nullptr) return 0;
        for (jint i = 0; i < count; ++i) {
            each(classes[i]);
            jni->DeleteLocalRef(classes[i]);
        }
        jvmti->Deallocate(reinterpret_cast<unsigned char*>(classes));
        return static_cast<size_t>(count);
    }

    // ---- Code events ----------------------------------------------------------------------
    void fill_from_blob(CodeLoad& load, const BlobInfo& b) {
        load.code_begin = b.code_begin;
        load.code_end = b.code_end;
        load.entry = b.entry;
        load.verified_entry = b.verified_entry;
        load.frame_size_words = b.frame_size;
        load.frame_complete_offset = b.frame_complete;
        load.comp_level = b.comp_level;
        load.kind = classify_nmethod(b.is_native, b.frame_size, b.entry_bci);
        load.osr_bci = load.kind == CodeKind::kOsr ? b.entry_bci : -1;
        load.deopt_handler = b.deopt_handler;
        load.orig_pc_offset = b.orig_pc_offset;
    }

    // The instruction bytes, for the decoder's prologue/epilogue disassembly (docs/decoder-needs.md).
    // `live` is the code JVMTI's callback is about ([code_addr, + code_size)), mapped while it runs:
    // a plain copy there, a checked read elsewhere.
    void copy_code(CodeLoad& load, vm::VouchedMemory::Span live = {}) {
        uint64_t size = load.code_end - load.code_begin;
        if (size == 0 || size > kMaxBlobBytes) return;
        load.code.resize(size);
        const vm::VouchedMemory memory(vm::process_memory(), live, {});
        if (!memory.read(load.code_begin, load.code.data(), size)) {
            note_bad_read(__LINE__);
            load.code.clear();
        }
    }

    void compiled_method_load(jmethodID method, jint code_size, const void* code_addr, const void* compile_info) {
        auto code_begin = reinterpret_cast<uint64_t>(code_addr);
        const uint64_t now = code_time(code_begin, monotonic_ns());
        CodeLoad load;
        load.time_ns = now;
        load.method_id = reinterpret_cast<uint64_t>(method);
        load.code_begin = code_begin;
        load.code_end = code_begin + static_cast<uint64_t>(std::max<jint>(code_size, 0));
        // The JVM keeps the nmethod alive while its CompiledMethodLoad is posted (also when the
        // event was deferred to the service thread, or generated for code loaded before us).
        auto blob = code_cache->find_live_blob(code_begin, load.code_end - code_begin);
        if (blob && blob->is_nmethod && blob->code_begin == code_begin) {
            fill_from_blob(load, *blob);
        } else {
            counters.code_loads_blob_missing++;
        }
        std::vector<jmethodID> methods_seen;
        methods_seen.push_back(method);
        CompileInfoStats stats = append_inline_scopes(compile_info, load, methods_seen);
        counters.pcs_outside_code += stats.pcs_outside_code;
        bool with_scopes = !load.scopes.empty() || load.kind == CodeKind::kNativeWrapper ||
                           load.kind == CodeKind::kMethodHandleIntrinsic;
        if (!announced.claim_code(code_begin, load.method_id, with_scopes)) return;

        // Methods first, so that the decoder can name every frame of the CodeLoad on arrival.
        std::sort(methods_seen.begin(), methods_seen.end());
        methods_seen.erase(std::unique(methods_seen.begin(), methods_seen.end()), methods_seen.end());
        JNIEnv* jni = current_jni();
        if (lazy_names.load(std::memory_order_relaxed)) {
            announce_methods_nameless(methods_seen, now);   // one event for all of them
        } else {
            for (jmethodID id : methods_seen) announce_method(jni, id, now);
        }

        copy_code(load, {code_begin, code_begin + static_cast<uint64_t>(std::max<jint>(code_size, 0))});
        counters.scopes += load.scopes.size();
        counters.code_loads++;
        sink.emit(std::move(load));
    }

    void compiled_method_unload(jmethodID method, const void* code_addr) {
        auto code_begin = reinterpret_cast<uint64_t>(code_addr);
        auto id = reinterpret_cast<uint64_t>(method);
        announced.forget_code(code_begin, id);
        counters.code_unloads++;
        sink.emit(CodeUnload{monotonic_ns(), id, code_begin});
    }

    void emit_stub(std::string name, uint64_t begin, uint64_t end, int32_t frame_size, uint64_t time_ns) {
        if (!announced.claim_stub(begin, end, name)) return;
        counters.stubs++;
        sink.emit(Stub{time_ns, std::move(name), begin, end, frame_size > 0 ? frame_size : -1});
    }

    void dynamic_code_generated(const char* name, const void* address, jint length) {
        auto begin = reinterpret_cast<uint64_t>(address);
        if (length <= 0 || begin == 0) return;
        int32_t frame_size = -1;
        if (auto blob = code_cache->find_blob(begin); blob && blob->code_begin == begin && !blob->is_nmethod) {
            frame_size = blob->frame_size;
        }
        emit_stub(name != nullptr ? name : "", begin, begin + static_cast<uint64_t>(length), frame_size,
                  monotonic_ns());
    }

    // CodeLoads (without inline scopes) for nmethods the CodeCache holds but no CompiledMethodLoad
    // announced. `require_seen_before`: only those already unannounced at the previous call, so
    // that a CompiledMethodLoad still queued in the VM's deferred event queue wins.
    void announce_unreported_nmethods(JNIEnv* jni, bool require_seen_before) {
        std::vector<BlobInfo> unreported;
        auto unknown = [&](uint64_t code_begin) { return !announced.code_known(code_begin); };
        uint64_t walk_time = monotonic_ns();
        code_cache->walk(
            [&](const BlobInfo& b) {
                if (b.is_nmethod) {
                    if (unknown(b.code_begin)) unreported.push_back(b);
                } else {
                    // Stubs generated later normally come with DynamicCodeGenerated; this keeps
                    // the decoder's map complete if one did not.
                    emit_stub(b.name, b.code_begin, b.code_end, b.frame_size, walk_time);
                }
            },
            unknown);
        std::unordered_set<uint64_t> seen_now;
        for (const BlobInfo& b : unreported) {
            seen_now.insert(b.code_begin);
            if (require_seen_before && !announced.unannounced_at_last_poll(b.code_begin)) continue;
            const uint64_t method_id = announced.method_id_of(b.method_ptr);
            if (method_id == 0) {
                counters.walk_unresolved_method++;
                continue;
            }
            const uint64_t now = code_time(b.code_begin, monotonic_ns());
            CodeLoad load;
            load.time_ns = now;
            load.method_id = method_id;
            fill_from_blob(load, b);
            if (!announced.claim_code(b.code_begin, method_id, false)) continue;
            copy_code(load);
            announce_method(jni, reinterpret_cast<jmethodID>(method_id), now);
            counters.code_loads_from_walk++;
            counters.code_loads++;
            sink.emit(std::move(load));
        }
        announced.set_unannounced_at_this_poll(std::move(seen_now));
    }

    // Classes a RedefineClasses or RetransformClasses (JFR's instrumentation, a Java agent's
    // transformers) is about to replace. Their new Method*s exist only once the VM operation after
    // the hook has run, so each is looked at again until its methods changed, and announced then;
    // interpreted frames name the new Method*s from their first call on, and the periodic poll
    // (5-60 s) came too late for the samples that waited for them (the decoder's retry, 0.5 s).
    struct PendingRedefinition {
        jclass klass = nullptr;   // a global reference
        uint64_t since_ns = 0;
    };
    std::mutex redefinitions_mutex;
    std::vector<PendingRedefinition> pending_redefinitions;   // under redefinitions_mutex

    void note_redefinition(JNIEnv* jni, jclass klass) {
        auto global = static_cast<jclass>(jni->NewGlobalRef(klass));
        if (global == nullptr) return;
        counters.classes_redefined++;
        std::lock_guard lock(redefinitions_mutex);
        pending_redefinitions.push_back({global, monotonic_ns()});
    }

    size_t recheck_redefinitions(JNIEnv* jni, uint64_t give_up_after_ns) {
        std::vector<PendingRedefinition> pending;
        {
            std::lock_guard lock(redefinitions_mutex);
            pending.swap(pending_redefinitions);
        }
        std::vector<PendingRedefinition> waiting;
        const uint64_t now = monotonic_ns();
        for (const PendingRedefinition& p : pending) {
            if (const size_t changed = announce_class(p.klass, now); changed != 0) {
                counters.redefined_methods += changed;
            } else if (now - p.since_ns < give_up_after_ns) {
                waiting.push_back(p);
                continue;
            } else {
                counters.redefinitions_unseen++;
            }
            jni->DeleteGlobalRef(p.klass);
        }
        std::lock_guard lock(redefinitions_mutex);
        pending_redefinitions.insert(pending_redefinitions.end(), waiting.begin(), waiting.end());
        return pending_redefinitions.size();
    }

    void recheck_redefined_methods(JNIEnv* jni) {
        const std::vector<uint64_t> changed =
            announced.redefined([this](uint64_t id) { return method_ptr_of(reinterpret_cast<jmethodID>(id)); });
        uint64_t now = monotonic_ns();
        for (uint64_t id : changed) {
            counters.redefined_methods++;
            announce_method(jni, reinterpret_cast<jmethodID>(id), now);
        }
    }
};

void VmCapture::add_capabilities(jvmtiCapabilities& caps) {
    caps.can_generate_compiled_method_load_events = 1;
    caps.can_get_source_file_name = 1;
    caps.can_get_line_numbers = 1;
}

bool VmCapture::add_retransform_notice(jvmtiEnv* jvmti) {
    jvmtiCapabilities potential{};
    if (jvmti->GetPotentialCapabilities(&potential) != JVMTI_ERROR_NONE || !potential.can_retransform_classes) return false;
    jvmtiCapabilities caps{};
    caps.can_retransform_classes = 1;
    return jvmti->AddCapabilities(&caps) == JVMTI_ERROR_NONE;
}

VmCapture::VmCapture(jvmtiEnv* jvmti, EventSink& sink) : impl_(std::make_unique<Impl>(jvmti, sink)) {}

VmCapture::~VmCapture() = default;

Status VmCapture::start(JNIEnv* jni, const SamplingParameters& params) {
    if (impl_->started.load()) return {};
    if (Status begun = begin(jni, params); !begun) return begun;
    scan(jni);
    return {};
}

Status VmCapture::begin(JNIEnv* jni, const SamplingParameters& params) {
    Impl& m = *impl_;
    if (m.started.load()) return {};
    if (jni == nullptr) return make_error(Errc::kInvalidArgument, "VmCapture::start needs a JNIEnv");
    jni->GetJavaVM(&m.java_vm);
    if (Status s = m.read_vm_info(params); !s) return s;
    m.valid_from_ns = params.valid_from_ns;
    m.sink.emit(VmInfo(m.info));
    m.started.store(true, std::memory_order_release);
    return {};
}

void VmCapture::scan(JNIEnv* jni) {
    Impl& m = *impl_;
    const uint64_t scan_begin = monotonic_ns();
    // Sampling since the agent's load: the stubs and the loaded classes' methods are stamped with
    // its time, as the VmInfo is, so that the stream has them before the samples held since then,
    // whose frames are mostly theirs. Both hold for the VM's life: nothing was unloaded before
    // VMInit, and a Method* or stub found now existed whenever a sample ran it.
    const uint64_t valid_from = m.valid_from_ns != 0 ? m.valid_from_ns : scan_begin;

    // Non-nmethod blobs first: stubs, adapters, the interpreter, runtime stubs; and which nmethods
    // are there now (code_time).
    m.code_cache->walk(
        [&](const BlobInfo& b) {
            if (!b.is_nmethod) {
                m.emit_stub(b.name, b.code_begin, b.code_end, b.frame_size, valid_from);
            } else {
                m.present_at_scan.insert(b.code_begin);
            }
        },
        [](uint64_t) { return false; });
    m.class_check_from_ns = scan_begin;
    m.announce_loaded_classes(jni, valid_from);
    m.jvmti->GenerateEvents(JVMTI_EVENT_DYNAMIC_CODE_GENERATED);
    m.scan_valid_from = valid_from;
    m.scanning_tid.store(static_cast<uint32_t>(gettid()), std::memory_order_release);
    m.jvmti->GenerateEvents(JVMTI_EVENT_COMPILED_METHOD_LOAD);
    m.announce_unreported_nmethods(jni, false);
    m.scanning_tid.store(0, std::memory_order_release);
    m.present_at_scan = {};
    m.start_scan_ns = monotonic_ns() - scan_begin;
}

void VmCapture::on_class_prepare(JNIEnv*, jthread, jclass klass) {
    if (!impl_->started.load(std::memory_order_acquire)) return;
    impl_->announce_class(klass, monotonic_ns());
}

void VmCapture::on_class_redefining(JNIEnv* jni, jclass class_being_redefined) {
    if (!impl_->started.load(std::memory_order_acquire) || jni == nullptr || class_being_redefined == nullptr) return;
    impl_->note_redefinition(jni, class_being_redefined);
}

size_t VmCapture::recheck_redefinitions(JNIEnv* jni) {
    if (!impl_->started.load(std::memory_order_acquire) || jni == nullptr) return 0;
    return impl_->recheck_redefinitions(jni, kRedefinitionWait.count() * 1'000'000ull);
}

void VmCapture::on_compiled_method_load(jmethodID method, jint code_size, const void* code_addr, jint,
                                        const jvmtiAddrLocationMap*, const void* compile_info) {
    if (!impl_->started.load(std::memory_order_acquire)) return;
    impl_->compiled_method_load(method, code_size, code_addr, compile_info);
}

void VmCapture::on_compiled_method_unload(jmethodID method, const void* code_addr) {
    if (!impl_->started.load(std::memory_order_acquire)) return;
    impl_->compiled_method_unload(method, code_addr);
}

void VmCapture::on_dynamic_code_generated(const char* name, const void* address, jint length) {
    if (!impl_->started.load(std::memory_order_acquire)) return;
    impl_->dynamic_code_generated(name, address, length);
}

void VmCapture::poll(JNIEnv* jni) {
    if (!impl_->started.load(std::memory_order_acquire)) return;
    impl_->recheck_redefined_methods(jni);
    impl_->announce_unreported_nmethods(jni, true);
}

size_t VmCapture::announce_unprepared_classes(JNIEnv* jni) {
    return misses_class_prepares() ? impl_->announce_unannounced_classes(jni) : 0;
}

uint64_t VmCapture::poll_findings() const {
    return impl_->counters.redefined_methods.load() + impl_->counters.code_loads_from_walk.load() +
           impl_->counters.classes_from_poll.load();
}

void VmCapture::set_lazy_names(bool lazy) { impl_->lazy_names.store(lazy); }

std::string VmCapture::names_text() const {
    const auto& c = impl_->counters;
    char text[256];
    std::snprintf(text, sizeof text, "method names on demand: %lu methods announced, %lu named for the profile, %lu no longer known%s",
                  static_cast<unsigned long>(c.methods.load()), static_cast<unsigned long>(c.methods_named.load()),
                  static_cast<unsigned long>(c.names_unresolved.load()),
                  impl_->lazy_names_given_up.load() ? " (then every method named at class preparation: classes were being unloaded)" : "");
    return text;
}

std::string VmCapture::redefinitions_text() const {
    const auto& c = impl_->counters;
    if (c.classes_redefined.load() == 0) return {};
    char text[256];
    std::snprintf(text, sizeof text,
                  "classes redefined or retransformed: %lu, their new methods announced: %lu, classes whose methods "
                  "had not changed %lld ms after the hook: %lu",
                  static_cast<unsigned long>(c.classes_redefined.load()), static_cast<unsigned long>(c.redefined_methods.load()),
                  static_cast<long long>(kRedefinitionWait.count()), static_cast<unsigned long>(c.redefinitions_unseen.load()));
    return text;
}

bool VmCapture::misses_class_prepares() const {
    return impl_->started.load(std::memory_order_acquire) && impl_->code_cache->layout().facts->class_prepare_missed_on_carrier;
}

std::string VmCapture::unannounced_classes_text() const {
    const auto& c = impl_->counters;
    if (c.classes_from_poll.load() == 0) return {};
    char text[256];
    std::snprintf(text, sizeof text, "classes no ClassPrepare announced, found by the code poll: %lu, their methods: %lu",
                  static_cast<unsigned long>(c.classes_from_poll.load()), static_cast<unsigned long>(c.methods_from_poll.load()));
    return text;
}

bool VmCapture::lazy_names() const { return impl_->lazy_names.load() || impl_->lazy_names_given_up.load(); }

std::vector<NamedMethod> VmCapture::names_of(JNIEnv* jni, const std::vector<uint64_t>& method_ids) {
    if (!impl_->started.load(std::memory_order_acquire)) return {};
    return impl_->names_of(jni, method_ids);
}

void VmCapture::name_methods(JNIEnv* jni, const std::vector<uint64_t>& method_ids) {
    for (NamedMethod& named : names_of(jni, method_ids)) impl_->sink.emit(std::move(named));
}

void VmCapture::announce_method(JNIEnv* jni, jmethodID method, uint64_t time_ns) {
    if (!impl_->started.load(std::memory_order_acquire)) return;
    impl_->announce_method(jni, method, time_ns);
}

std::pair<uint64_t, uint64_t> VmCapture::code_cache() const {
    if (!impl_->started.load(std::memory_order_acquire)) return {0, 0};
    return {impl_->info.code_cache_low, impl_->info.code_cache_high};
}

std::string VmCapture::describe() const {
    const Impl& m = *impl_;
    if (!m.started.load(std::memory_order_acquire)) return "VM capture not started";
    char buffer[768];
    const auto& c = m.counters;
    std::snprintf(buffer, sizeof buffer,
                  "JDK %d (%s), layout %d%s, interpreter [0x%lx,0x%lx) %lu B with %zu entry codelets, "
                  "code cache [0x%lx,0x%lx) in %zu heaps; start scan %.1f ms; methods %lu (%lu failed, "
                  "%lu redefined in %lu classes, %lu classes unchanged), code loads %lu (%lu from the CodeCache walk, %lu without blob, %lu "
                  "unresolvable), unloads %lu, stubs %lu, bad reads %lu",
                  m.info.jdk_major, m.info.vm_version.c_str(), static_cast<int>(m.code_cache->layout().facts->family),
                  m.code_cache->layout().layout_guessed ? " (guessed)" : "",
                  static_cast<unsigned long>(m.info.interpreter_begin),
                  static_cast<unsigned long>(m.info.interpreter_end),
                  static_cast<unsigned long>(m.info.interpreter_end - m.info.interpreter_begin),
                  m.info.entry_codelets.size(), static_cast<unsigned long>(m.info.code_cache_low),
                  static_cast<unsigned long>(m.info.code_cache_high), m.code_cache->heap_count(),
                  static_cast<double>(m.start_scan_ns.load()) / 1e6,
                  static_cast<unsigned long>(c.methods.load()), static_cast<unsigned long>(c.method_failures.load()),
                  static_cast<unsigned long>(c.redefined_methods.load()),
                  static_cast<unsigned long>(c.classes_redefined.load()),
                  static_cast<unsigned long>(c.redefinitions_unseen.load()),
                  static_cast<unsigned long>(c.code_loads.load()),
                  static_cast<unsigned long>(c.code_loads_from_walk.load()),
                  static_cast<unsigned long>(c.code_loads_blob_missing.load()),
                  static_cast<unsigned long>(c.walk_unresolved_method.load()),
                  static_cast<unsigned long>(c.code_unloads.load()), static_cast<unsigned long>(c.stubs.load()),
                  static_cast<unsigned long>(m.code_cache->bad_reads()));
    std::string text = buffer;
    if (m.lazy_names.load()) text += "; method names on demand";
    return text;
}

}  // namespace sf::agent
