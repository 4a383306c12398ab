// A JDK Flight Recorder file with the profile's samples (docs/jfr-format.md says which part of the
// format is written, field by field, and where each fact comes from).
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "stackfrag/profile/export.hpp"

namespace sf::profile {

namespace {

// Type ids of this file's metadata. 0 and 1 are the metadata and checkpoint events themselves.
enum TypeId : uint64_t {
    kBoolean = 4,
    kInt = 8,
    kLong = 9,
    kString = 20,
    kClass = 21,
    kThread = 22,
    kClassLoader = 23,
    kFrameType = 24,
    kThreadState = 25,
    kStackTrace = 26,
    kStackFrame = 27,
    kMethod = 28,
    kPackage = 29,
    kSymbol = 30,
    kExecutionSample = 101,
    kOffCpuSample = 102,
    kLabel = 200,
    kCategory = 201,
    kTimestamp = 202,
    kDescription = 203,
};

constexpr uint64_t kMetadataEvent = 0;
constexpr uint64_t kCheckpointEvent = 1;
constexpr uint64_t kTicksPerSecond = 1'000'000'000;   // ticks are CLOCK_MONOTONIC nanoseconds
constexpr size_t kChunkHeaderBytes = 68;

// Frame type constants (jdk.types.FrameType), as the JVM names them.
enum FrameTypeKey : uint64_t { kInterpretedKey = 1, kJitKey = 2, kInlinedKey = 3, kNativeKey = 4, kUnknownKey = 5 };
constexpr uint64_t kRunnableKey = 1;   // jdk.types.ThreadState

class Bytes {
public:
    void u8(uint8_t v) { data_.push_back(static_cast<char>(v)); }
    // JFR's compressed integers: 7 bits a byte, low first, high bit = more; the 9th byte has 8 bits.
    void varint(uint64_t v) {
        for (int i = 0; i < 8; ++i) {
            if (v < 0x80) {
                u8(static_cast<uint8_t>(v));
                return;
            }
            u8(static_cast<uint8_t>(v | 0x80));
            v >>= 7;
        }
        u8(static_cast<uint8_t>(v));
    }
    // Signed 32-bit values go in as their unsigned bits: the reader truncates to int.
    void int32(int32_t v) { varint(static_cast<uint32_t>(v)); }
    void boolean(bool v) { u8(v ? 1 : 0); }
    // String encoding 3: UTF-8 bytes with their length (encoding 0 would be null, 1 empty).
    void string(std::string_view text) {
        u8(3);
        varint(text.size());
        data_.append(text);
    }
    void be(uint64_t v, int bytes) {
        for (int i = bytes - 1; i >= 0; --i) u8(static_cast<uint8_t>(v >> (8 * i)));
    }
    void append(const Bytes& other) { data_.append(other.data_); }
    size_t size() const { return data_.size(); }
    const std::string& data() const { return data_; }
    void patch_be(size_t at, uint64_t v, int bytes) {
        for (int i = 0; i < bytes; ++i) data_[at + i] = static_cast<char>(v >> (8 * (bytes - 1 - i)));
    }

private:
    std::string data_;
};

size_t varint_bytes(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80 && n < 9) v >>= 7, ++n;
    return n;
}

// An event is its size (counting the size field itself), then its type and fields.
void put_event(Bytes& out, const Bytes& body) {
    size_t total = body.size() + 1;
    while (body.size() + varint_bytes(total) != total) total = body.size() + varint_bytes(total);
    out.varint(total);
    out.append(body);
}

// The metadata event's element tree: names and attribute values are indexes into a string table.
class Metadata {
public:
    struct Element {
        uint32_t name;
        std::vector<std::pair<uint32_t, uint32_t>> attributes;
        std::vector<Element> children;
    };

    uint32_t intern(std::string_view text) {
        auto [it, added] = index_.try_emplace(std::string(text), static_cast<uint32_t>(strings_.size()));
        if (added) strings_.emplace_back(text);
        return it->second;
    }
    Element element(std::string_view name) { return Element{intern(name), {}, {}}; }
    void attribute(Element& e, std::string_view key, std::string_view value) {
        e.attributes.emplace_back(intern(key), intern(value));
    }
    Element annotation(uint64_t type, std::string_view value = {}) {
        Element a = element("annotation");
        attribute(a, "class", std::to_string(type));
        if (!value.empty()) attribute(a, "value", value);
        return a;
    }
    Element type(std::string_view name, uint64_t id, std::string_view super_type = {}, bool simple = false,
                 std::string_view label = {}) {
        Element t = element("class");
        attribute(t, "name", name);
        attribute(t, "id", std::to_string(id));
        if (!super_type.empty()) attribute(t, "superType", super_type);
        if (simple) attribute(t, "simpleType", "true");
        if (!label.empty()) t.children.push_back(annotation(kLabel, label));
        return t;
    }
    enum FieldFlags : unsigned { kPlain = 0, kPool = 1, kArray = 2, kTicks = 4 };
    Element field(std::string_view name, uint64_t type, std::string_view label = {}, unsigned flags = kPlain) {
        Element f = element("field");
        attribute(f, "name", name);
        attribute(f, "class", std::to_string(type));
        if (flags & kPool) attribute(f, "constantPool", "true");
        if (flags & kArray) attribute(f, "dimension", "1");
        if (!label.empty()) f.children.push_back(annotation(kLabel, label));
        if (flags & kTicks) f.children.push_back(annotation(kTimestamp, "TICKS"));
        return f;
    }

    void write(Bytes& out, const Element& root) const {
        out.varint(strings_.size());
        for (const std::string& s : strings_) out.string(s);
        write_element(out, root);
    }

private:
    static void write_element(Bytes& out, const Element& e) {
        out.varint(e.name);
        out.varint(e.attributes.size());
        for (const auto& [key, value] : e.attributes) {
            out.varint(key);
            out.varint(value);
        }
        out.varint(e.children.size());
        for (const Element& child : e.children) write_element(out, child);
    }

    std::vector<std::string> strings_;
    std::unordered_map<std::string, uint32_t> index_;
};

// A field of a type in the metadata: name, type id, label, Metadata::FieldFlags.
struct FieldSpec {
    std::string_view name;
    uint64_t type;
    std::string_view label;
    unsigned flags = Metadata::kPlain;
};

// The value types the events refer to (docs/jfr-format.md, "Types written").
struct TypeSpec {
    std::string_view name;
    uint64_t id;
    std::string_view label;
    bool simple;
    std::vector<FieldSpec> fields;
};

const std::vector<TypeSpec>& value_types() {
    constexpr unsigned pool = Metadata::kPool;
    static const std::vector<TypeSpec> types{
        {"java.lang.Class", kClass, "Java Class", false,
         {{"classLoader", kClassLoader, "Class Loader", pool}, {"name", kSymbol, "Name", pool},
          {"package", kPackage, "Package", pool}, {"modifiers", kInt, "Access Modifiers"}, {"hidden", kBoolean, "Hidden"}}},
        {"java.lang.Thread", kThread, "Thread", false,
         {{"osName", kString, "OS Thread Name"}, {"osThreadId", kLong, "OS Thread Id"},
          {"javaName", kString, "Java Thread Name"}, {"javaThreadId", kLong, "Java Thread Id"}}},
        {"jdk.types.ClassLoader", kClassLoader, "Java Class Loader", false,
         {{"type", kClass, "Type", pool}, {"name", kSymbol, "Name", pool}}},
        {"jdk.types.FrameType", kFrameType, "Frame type", true, {{"description", kString, "Description"}}},
        {"jdk.types.ThreadState", kThreadState, "Java Thread State", true, {{"name", kString, "Name"}}},
        {"jdk.types.StackTrace", kStackTrace, "Stacktrace", false,
         {{"truncated", kBoolean, "Truncated"}, {"frames", kStackFrame, "Stack Frames", Metadata::kArray}}},
        {"jdk.types.StackFrame", kStackFrame, {}, false,
         {{"method", kMethod, "Java Method", pool}, {"lineNumber", kInt, "Line Number"},
          {"bytecodeIndex", kInt, "Bytecode Index"}, {"type", kFrameType, "Frame Type", pool}}},
        {"jdk.types.Method", kMethod, "Java Method", false,
         {{"type", kClass, "Type", pool}, {"name", kSymbol, "Name", pool}, {"descriptor", kSymbol, "Descriptor", pool},
          {"modifiers", kInt, "Access Modifiers"}, {"hidden", kBoolean, "Hidden"}}},
        {"jdk.types.Package", kPackage, "Package", false, {{"name", kSymbol, "Name", pool}}},
        {"jdk.types.Symbol", kSymbol, "Symbol", true, {{"string", kString, "String"}}},
    };
    return types;
}

Metadata::Element build_metadata(Metadata& m) {
    using E = Metadata::Element;
    E root = m.element("root");
    E metadata = m.element("metadata");
    auto add = [&](E type) { metadata.children.push_back(std::move(type)); };
    for (auto [name, id] : {std::pair<const char*, uint64_t>{"boolean", kBoolean}, {"int", kInt}, {"long", kLong},
                            {"java.lang.String", kString}}) {
        add(m.type(name, id));
    }
    const unsigned pool = Metadata::kPool;
    for (const TypeSpec& spec : value_types()) {
        E t = m.type(spec.name, spec.id, {}, spec.simple, spec.label);
        for (const FieldSpec& f : spec.fields) t.children.push_back(m.field(f.name, f.type, f.label, f.flags));
        add(std::move(t));
    }
    auto category = [&](std::initializer_list<std::string_view> path) {
        E a = m.element("annotation");
        m.attribute(a, "class", std::to_string(kCategory));
        int i = 0;
        for (std::string_view part : path) m.attribute(a, "value-" + std::to_string(i++), part);
        return a;
    };
    {
        E t = m.type("jdk.ExecutionSample", kExecutionSample, "jdk.jfr.Event", false, "Method Profiling Sample");
        t.children.push_back(category({"Java Virtual Machine", "Profiling"}));
        t.children.push_back(m.annotation(kDescription, "Snapshot of a thread's state (stackfrag: a perf clock sample)"));
        t.children.push_back(m.field("startTime", kLong, "Start Time", Metadata::kTicks));
        t.children.push_back(m.field("sampledThread", kThread, "Thread", pool));
        t.children.push_back(m.field("stackTrace", kStackTrace, "Stack Trace", pool));
        t.children.push_back(m.field("state", kThreadState, "Thread State", pool));
        add(std::move(t));
    }
    {
        E t = m.type("stackfrag.OffCpuSample", kOffCpuSample, "jdk.jfr.Event", false, "Off-CPU Sample");
        t.children.push_back(category({"Java Virtual Machine", "Profiling"}));
        t.children.push_back(
            m.annotation(kDescription, "Where a thread left the CPU (stackfrag events=switch: one per context switch)"));
        t.children.push_back(m.field("startTime", kLong, "Start Time", Metadata::kTicks));
        t.children.push_back(m.field("sampledThread", kThread, "Thread", pool));
        t.children.push_back(m.field("stackTrace", kStackTrace, "Stack Trace", pool));
        add(std::move(t));
    }
    const std::string annotation = "java.lang.annotation.Annotation";
    for (auto [name, id, array] : {std::tuple<const char*, uint64_t, bool>{"jdk.jfr.Label", kLabel, false},
                                   {"jdk.jfr.Category", kCategory, true},
                                   {"jdk.jfr.Timestamp", kTimestamp, false},
                                   {"jdk.jfr.Description", kDescription, false}}) {
        E t = m.type(name, id, annotation);
        t.children.push_back(m.field("value", kString, {}, array ? Metadata::kArray : Metadata::kPlain));
        metadata.children.push_back(std::move(t));
    }
    root.children.push_back(std::move(metadata));
    E region = m.element("region");
    m.attribute(region, "locale", "en_US");
    m.attribute(region, "gmtOffset", "0");
    root.children.push_back(std::move(region));
    return root;
}

// Constant pools: values interned to keys (from 1; key 0 is null).
class Pool {
public:
    uint64_t key(const std::string& value) {
        auto [it, added] = keys_.try_emplace(value, keys_.size() + 1);
        if (added) order_.push_back(value);
        return it->second;
    }
    const std::vector<std::string>& values() const { return order_; }

private:
    std::unordered_map<std::string, uint64_t> keys_;
    std::vector<std::string> order_;
};

struct JfrMethod {
    uint64_t class_key = 0;
    uint64_t name_symbol = 0;
    uint64_t descriptor_symbol = 0;
};

struct JfrClass {
    uint64_t name_symbol = 0;
    uint64_t package_key = 0;   // 0: the unnamed package
};

struct JfrFrame {
    uint64_t method_key = 0;
    int32_t line = 0;
    int32_t bci = -1;
    uint64_t type_key = 0;
};

struct JfrStack {
    bool truncated = false;
    std::vector<JfrFrame> frames;   // top first
};

struct JfrThread {
    std::string name;
    uint32_t tid = 0;
};

class JfrBuilder {
public:
    explicit JfrBuilder(const Cct& cct) : cct_(cct), method_of_frame_(cct.frame_count(), 0) {}

    // The stack of `leaf` with the innermost frame at (bci, line); its pool key. The thread frame
    // of a per-thread tree, if any, is returned through `thread_tid`.
    uint64_t stack(NodeId leaf, int32_t bci, int32_t line, std::optional<uint32_t>* thread_tid) {
        const uint64_t id = (static_cast<uint64_t>(leaf) << 32) ^ static_cast<uint32_t>(bci);
        auto found = stack_keys_.find(id);
        if (found != stack_keys_.end() && thread_tid == nullptr) return found->second;
        JfrStack stack;
        stack.frames.reserve(cct_.node(leaf).depth);
        // From the leaf towards the root (top first, as JFR lists frames), each frame's position
        // being its callee's call site; no path vector built.
        const Node* callee = nullptr;
        for (NodeId at = leaf; at != kRootNode; at = cct_.node(at).parent) {
            const Node& node = cct_.node(at);
            const Node* const callee_of_this = callee;
            callee = &node;
            const FrameDesc& frame = cct_.frame(node.frame);
            if (frame.type == FrameType::kTruncated) {
                stack.truncated = true;
                continue;
            }
            // A failed walk's marker stays as the stack's outermost frame, so the reason is seen.
            if (frame.type == FrameType::kFailed) stack.truncated = true;
            if (frame.type == FrameType::kThread) {
                if (thread_tid != nullptr) *thread_tid = tid_of_thread_frame(frame.name);
                continue;
            }
            JfrFrame out;
            out.method_key = method(node.frame);
            out.type_key = frame_type_key(frame.type);
            if (callee_of_this == nullptr) {
                out.bci = bci;
                out.line = line;
            } else {
                out.bci = callee_of_this->call_bci;
                out.line = callee_of_this->call_line;
            }
            if (!is_java(frame.type)) out.bci = -1, out.line = 0;
            stack.frames.push_back(out);
        }
        if (found != stack_keys_.end()) return found->second;
        const uint64_t key = stacks_.size() + 1;
        stacks_.push_back(std::move(stack));
        stack_keys_.emplace(id, key);
        return key;
    }

    uint64_t thread(uint32_t tid) {
        auto [it, added] = thread_keys_.try_emplace(tid, threads_.size() + 1);
        if (added) {
            const std::string* name = cct_.thread_name(tid);
            std::string text = name != nullptr && !name->empty() ? *name
                               : tid == 0                     ? std::string("[threads not recorded]")
                                                              : fmt::format("[tid={}]", tid);
            threads_.push_back(JfrThread{std::move(text), tid});
        }
        return it->second;
    }

    // One checkpoint event holding every pool the events refer to.
    void write_checkpoint(Bytes& out, uint64_t start_ticks) {
        Bytes body;
        body.varint(kCheckpointEvent);
        body.varint(start_ticks);
        body.varint(0);   // duration
        body.varint(0);   // delta to the next checkpoint: none
        body.u8(1);       // checkpoint type: flush
        Bytes pools;
        int count = 0;
        auto pool = [&](uint64_t type, size_t size, auto&& entries) {
            if (size == 0) return;   // the JDK's reader refuses empty pools
            pools.varint(type);
            pools.varint(size);
            entries();
            ++count;
        };
        pool(kFrameType, 5, [&] {
            for (auto [key, text] : {std::pair<uint64_t, const char*>{kInterpretedKey, "Interpreted"},
                                     {kJitKey, "JIT compiled"}, {kInlinedKey, "Inlined"}, {kNativeKey, "Native"},
                                     {kUnknownKey, "Unknown"}}) {
                pools.varint(key);
                pools.string(text);
            }
        });
        pool(kThreadState, 1, [&] {
            pools.varint(kRunnableKey);
            pools.string("STATE_RUNNABLE");
        });
        pool(kThread, threads_.size(), [&] {
            for (size_t i = 0; i < threads_.size(); ++i) {
                pools.varint(i + 1);
                pools.string(threads_[i].name);   // osName
                pools.varint(threads_[i].tid);    // osThreadId
                pools.string(threads_[i].name);   // javaName
                pools.varint(0);                  // javaThreadId: not recorded (0: tools show the OS id)
            }
        });
        pool(kStackTrace, stacks_.size(), [&] {
            for (size_t i = 0; i < stacks_.size(); ++i) {
                pools.varint(i + 1);
                pools.boolean(stacks_[i].truncated);
                pools.varint(stacks_[i].frames.size());
                for (const JfrFrame& f : stacks_[i].frames) {
                    pools.varint(f.method_key);
                    pools.int32(f.line);
                    pools.int32(f.bci);
                    pools.varint(f.type_key);
                }
            }
        });
        pool(kMethod, methods_.size(), [&] {
            for (size_t i = 0; i < methods_.size(); ++i) {
                pools.varint(i + 1);
                pools.varint(methods_[i].class_key);
                pools.varint(methods_[i].name_symbol);
                pools.varint(methods_[i].descriptor_symbol);
                pools.int32(0);       // modifiers: not recorded in the profile
                pools.boolean(false);
            }
        });
        pool(kClass, classes_.values().size(), [&] {
            for (size_t i = 0; i < class_info_.size(); ++i) {
                pools.varint(i + 1);
                pools.varint(0);   // class loader: not recorded
                pools.varint(class_info_[i].name_symbol);
                pools.varint(class_info_[i].package_key);
                pools.int32(0);
                pools.boolean(false);
            }
        });
        pool(kPackage, packages_.values().size(), [&] {
            for (size_t i = 0; i < package_symbols_.size(); ++i) {
                pools.varint(i + 1);
                pools.varint(package_symbols_[i]);
            }
        });
        pool(kSymbol, symbols_.values().size(), [&] {
            for (size_t i = 0; i < symbols_.values().size(); ++i) {
                pools.varint(i + 1);
                pools.string(symbols_.values()[i]);
            }
        });
        body.varint(count);
        body.append(pools);
        put_event(out, body);
    }

private:
    static uint64_t frame_type_key(FrameType type) {
        switch (type) {
            case FrameType::kInterpreted: return kInterpretedKey;
            case FrameType::kCompiled: return kJitKey;
            case FrameType::kInlined: return kInlinedKey;
            case FrameType::kJava: return kUnknownKey;
            default: return kNativeKey;   // native wrappers (JNI), native code, stubs, markers
        }
    }

    static uint32_t tid_of_thread_frame(std::string_view name) {
        const size_t at = name.rfind("tid=");
        return at == std::string_view::npos ? 0 : static_cast<uint32_t>(std::strtoul(std::string(name.substr(at + 4)).c_str(), nullptr, 10));
    }

    uint64_t class_key(const std::string& internal_name) {
        const size_t before = classes_.values().size();
        const uint64_t key = classes_.key(internal_name);
        if (classes_.values().size() != before) {
            const size_t slash = internal_name.rfind('/');
            JfrClass c;
            c.name_symbol = symbols_.key(internal_name);
            if (slash != std::string::npos) {
                const size_t packages_before = packages_.values().size();
                c.package_key = packages_.key(internal_name.substr(0, slash));
                if (packages_.values().size() != packages_before) {
                    package_symbols_.push_back(symbols_.key(internal_name.substr(0, slash)));
                }
            }
            class_info_.push_back(c);
        }
        return key;
    }

    uint64_t method(FrameId id) {
        if (method_of_frame_[id] != 0) return method_of_frame_[id];
        const FrameDesc& frame = cct_.frame(id);
        JfrMethod m;
        if (is_java(frame.type)) {
            // "java/lang/String.indexOf": the class in internal form, as JFR writes it too.
            const size_t dot = frame.name.rfind('.');
            const std::string class_name = dot == std::string::npos ? std::string() : frame.name.substr(0, dot);
            m.class_key = class_key(class_name);
            m.name_symbol = symbols_.key(dot == std::string::npos ? frame.name : frame.name.substr(dot + 1));
            m.descriptor_symbol = symbols_.key(frame.signature.empty() ? "()V" : frame.signature);
        } else {
            // Native code, stubs and marker frames: the symbol as the method of a nameless class. The
            // descriptor must have parentheses: `jfr print` takes the parameters from between them.
            m.class_key = class_key("");
            m.name_symbol = symbols_.key(frame.name);
            m.descriptor_symbol = symbols_.key("()V");
        }
        methods_.push_back(m);
        method_of_frame_[id] = methods_.size();
        return methods_.size();
    }

    const Cct& cct_;
    std::vector<uint64_t> method_of_frame_;   // FrameId -> method key, 0 not yet
    std::vector<JfrMethod> methods_;
    Pool classes_;
    std::vector<JfrClass> class_info_;
    Pool packages_;
    std::vector<uint64_t> package_symbols_;
    Pool symbols_;
    std::vector<JfrStack> stacks_;
    std::unordered_map<uint64_t, uint64_t> stack_keys_;
    std::vector<JfrThread> threads_;
    std::unordered_map<uint32_t, uint64_t> thread_keys_;
};

struct JfrEvent {
    uint64_t ticks;
    uint64_t thread_key;
    uint64_t stack_key;
};

}  // namespace

Status write_jfr(const Cct& cct, std::ostream& out) {
    const ProfileInfo& info = cct.info();
    JfrBuilder builder(cct);
    std::vector<JfrEvent> events;
    uint64_t first_ticks = 0;
    uint64_t last_ticks = 0;
    int64_t to_unix = info.monotonic_to_unix_ns;
    if (!cct.samples().empty()) {
        // One event per sample, at its own time, on its own thread.
        events.reserve(cct.samples().size());
        for (const SampleRecord& s : cct.samples()) {
            events.push_back(JfrEvent{s.time_ns, builder.thread(s.tid), builder.stack(s.node, s.bci, s.line, nullptr)});
        }
        auto [lo, hi] = std::minmax_element(events.begin(), events.end(),
                                            [](const JfrEvent& a, const JfrEvent& b) { return a.ticks < b.ticks; });
        first_ticks = lo->ticks;
        last_ticks = hi->ticks;
    } else {
        // Only counts (a tree read from json or collapsed stacks, or one filtered): one event per
        // count of each node, the i-th at start + i x period, so that durations add up.
        const uint64_t step = info.period_ns != 0 ? info.period_ns : 1'000'000;
        first_ticks = info.start_unix_ns != 0 ? info.start_unix_ns : 0;
        to_unix = 0;   // the synthetic times are Unix times already
        uint64_t ticks = first_ticks;
        std::optional<uint64_t> anonymous;
        cct.visit([&](NodeId id, const Node& node) {
            if (id == kRootNode || node.self_samples == 0) return;
            std::optional<uint32_t> tid;
            const uint64_t stack = builder.stack(id, -1, 0, &tid);
            uint64_t thread_key;
            if (tid) {
                thread_key = builder.thread(*tid);
            } else {
                if (!anonymous) anonymous = builder.thread(0);
                thread_key = *anonymous;
            }
            for (uint64_t n = 0; n < node.self_samples; ++n, ticks += step) events.push_back(JfrEvent{ticks, thread_key, stack});
        });
        last_ticks = events.empty() ? first_ticks : events.back().ticks;
    }

    Bytes file;
    // Chunk header: big-endian; sizes and offsets are patched once known.
    file.u8('F'), file.u8('L'), file.u8('R'), file.u8(0);
    file.be(2, 2);   // major
    file.be(0, 2);   // minor
    file.be(0, 8);   // chunk size
    file.be(0, 8);   // constant pool offset
    file.be(0, 8);   // metadata offset
    const uint64_t start_unix = static_cast<uint64_t>(static_cast<int64_t>(first_ticks) + to_unix);
    file.be(start_unix, 8);
    file.be(last_ticks - first_ticks + 1, 8);   // duration ns
    file.be(first_ticks, 8);                    // start ticks
    file.be(kTicksPerSecond, 8);
    file.be(0, 1);   // file state: 0 = finished
    file.be(0, 2);
    file.be(1, 1);   // flags: compressed integers
    if (file.size() != kChunkHeaderBytes) return make_error(Errc::kInternal, "JFR chunk header size");

    const size_t metadata_offset = file.size();
    {
        Metadata metadata;
        const Metadata::Element root = build_metadata(metadata);
        Bytes body;
        body.varint(kMetadataEvent);
        body.varint(first_ticks);
        body.varint(0);   // duration
        body.varint(1);   // metadata id
        metadata.write(body, root);
        put_event(file, body);
    }
    const uint64_t type = info.off_cpu ? kOffCpuSample : kExecutionSample;
    for (const JfrEvent& e : events) {
        Bytes body;
        body.varint(type);
        body.varint(e.ticks);
        body.varint(e.thread_key);
        body.varint(e.stack_key);
        if (!info.off_cpu) body.varint(kRunnableKey);
        put_event(file, body);
    }
    const size_t checkpoint_offset = file.size();
    builder.write_checkpoint(file, first_ticks);
    file.patch_be(8, file.size(), 8);
    file.patch_be(16, checkpoint_offset, 8);
    file.patch_be(24, metadata_offset, 8);
    out.write(file.data().data(), static_cast<std::streamsize>(file.size()));
    if (!out) return make_error(Errc::kIo, "cannot write the JFR recording");
    return {};
}

}  // namespace sf::profile
