#include "event_codec.hpp"

#include <concepts>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "recording_format.hpp"

namespace sf::event_codec {

using recording_format::load_le;
using recording_format::store_le;

namespace {

template <class T, class U>
concept Is = std::same_as<std::remove_const_t<T>, U>;

// One field list per type, visited in order by the sizer, the encoder and the decoder.
// New fields go at the END of a list only (old readers ignore trailing bytes), after a
// `v(kLaterFields)`: a body that ends right before them (written before they existed) leaves them at
// their defaults. Never in a struct that is nested in another (Sample in Oracle): only a body's end
// tells where it stops.
struct LaterFields {};
constexpr LaterFields kLaterFields{};

template <class V, Is<Registers> T>
void fields(V& v, T& r) {
    v(r.ip), v(r.sp), v(r.bp), v(r.ax), v(r.bx), v(r.r13), v(r.r15);
}
template <class V, Is<Sample> T>
void fields(V& v, T& s) {
    v(s.time_ns), v(s.pid), v(s.tid), v(s.source), v(s.regs), v(s.stack_sp), v(s.stack);
}
template <class V, Is<MethodBci> T>
void fields(V& v, T& m) {
    v(m.method_id), v(m.bci);
}
template <class V, Is<PcScope> T>
void fields(V& v, T& p) {
    v(p.pc_offset), v(p.first), v(p.count);
}
template <class V, Is<CodeLoad> T>
void fields(V& v, T& c) {
    v(c.time_ns), v(c.method_id), v(c.code_begin), v(c.code_end), v(c.entry), v(c.verified_entry),
        v(c.frame_size_words), v(c.frame_complete_offset), v(c.comp_level), v(c.kind), v(c.osr_bci),
        v(c.deopt_handler), v(c.orig_pc_offset), v(c.scopes), v(c.frames), v(c.code);
}
template <class V, Is<CodeUnload> T>
void fields(V& v, T& c) {
    v(c.time_ns), v(c.method_id), v(c.code_begin);
}
template <class V, Is<Stub> T>
void fields(V& v, T& s) {
    v(s.time_ns), v(s.name), v(s.begin), v(s.end), v(s.frame_size_words);
}
template <class V, Is<LineEntry> T>
void fields(V& v, T& l) {
    v(l.start_bci), v(l.line);
}
template <class V, Is<MethodInfo> T>
void fields(V& v, T& m) {
    v(m.time_ns), v(m.method_id), v(m.method_ptr), v(m.bytecode_begin), v(m.bytecode_size),
        v(m.access_flags), v(m.class_name), v(m.name), v(m.signature), v(m.source_file), v(m.lines);
}
template <class V, Is<MethodEntry> T>
void fields(V& v, T& m) {
    v(m.method_id), v(m.method_ptr), v(m.bytecode_begin), v(m.bytecode_size), v(m.access_flags);
}
template <class V, Is<MethodBatch> T>
void fields(V& v, T& b) {
    v(b.time_ns), v(b.methods);
}
template <class V, Is<NamedMethod> T>
void fields(V& v, T& m) {
    v(m.time_ns), v(m.method_id), v(m.resolved), v(m.class_name), v(m.name), v(m.signature), v(m.source_file),
        v(m.lines);
}
template <class V, Is<CodeRange> T>
void fields(V& v, T& r) {
    v(r.begin), v(r.end), v(r.description);
}
template <class V, Is<VmInfo> T>
void fields(V& v, T& i) {
    v(i.time_ns), v(i.pid), v(i.jdk_major), v(i.vm_version), v(i.layout), v(i.call_stub_return),
        v(i.interpreter_begin), v(i.interpreter_end), v(i.entry_codelets), v(i.code_cache_low),
        v(i.code_cache_high), v(i.continuation_return_pc), v(i.sample_stack_bytes), v(i.sample_period_ns),
        v(kLaterFields), v(i.max_frames);
}
template <class V, Is<Oracle> T>
void fields(V& v, T& o) {
    v(o.sample), v(o.agct_status), v(o.frames);
}
template <class V, Is<ThreadInfo> T>
void fields(V& v, T& t) {
    v(t.time_ns), v(t.tid), v(t.ended), v(t.name), v(kLaterFields), v(t.kind);
}
template <class V, Is<Lost> T>
void fields(V& v, T& l) {
    v(l.time_ns), v(l.tid), v(l.count);
}
template <class V, Is<ModuleMap> T>
void fields(V& v, T& m) {
    v(m.time_ns), v(m.begin), v(m.end), v(m.file_offset), v(m.path), v(kLaterFields), v(m.build_id),
        v(kLaterFields), v(m.image);
}
template <class V, Is<JvmtiTrace> T>
void fields(V& v, T& t) {
    v(t.time_ns), v(t.tid), v(t.truncated), v(t.frames);
}

template <class V, Is<ProcessCpu> T>
void fields(V& v, T& p) {
    v(p.time_ns), v(p.user_ns), v(p.system_ns), v(kLaterFields), v(p.at_start), v(kLaterFields), v(p.host_busy_ns),
        v(p.host_steal_ns);
}

template <class T>
concept Scalar = std::is_integral_v<T> || std::is_enum_v<T>;

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

template <class T>
size_t scalar_size() {
    if constexpr (std::is_same_v<T, bool>) return 1;
    else return sizeof(T);
}

template <class T>
auto scalar_bits(T value) {
    if constexpr (std::is_same_v<T, bool>) return static_cast<uint8_t>(value ? 1 : 0);
    else if constexpr (std::is_enum_v<T>) return static_cast<std::make_unsigned_t<std::underlying_type_t<T>>>(value);
    else return static_cast<std::make_unsigned_t<T>>(value);
}

struct Sizer {
    size_t total = 0;

    template <class T>
    void operator()(const T& value) {
        if constexpr (std::is_same_v<T, LaterFields>) {
            return;
        } else if constexpr (Scalar<T>) {
            total += scalar_size<T>();
        } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::vector<uint8_t>>) {
            total += 4 + value.size();
        } else if constexpr (IsVector<T>::value) {
            total += 4;
            for (const auto& element : value) (*this)(element);
        } else {
            fields(*this, value);
        }
    }
};

struct Encoder {
    uint8_t* out;

    template <class T>
    void operator()(const T& value) {
        if constexpr (std::is_same_v<T, LaterFields>) {
            return;
        } else if constexpr (Scalar<T>) {
            const auto bits = scalar_bits(value);
            store_le(out, bits);
            out += sizeof(bits);
        } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::vector<uint8_t>>) {
            // The writer refuses events above kMaxChunkRawBytes first, so the length fits.
            store_le(out, static_cast<uint32_t>(value.size()));
            out += 4;
            if (!value.empty()) std::memcpy(out, value.data(), value.size());
            out += value.size();
        } else if constexpr (IsVector<T>::value) {
            store_le(out, static_cast<uint32_t>(value.size()));
            out += 4;
            for (const auto& element : value) (*this)(element);
        } else {
            fields(*this, value);
        }
    }
};

template <class T>
size_t encoded_size_of_default() {
    Sizer sizer;
    sizer(T{});
    return sizer.total;
}

struct Decoder {
    const uint8_t* in;
    const uint8_t* end;
    const char* failure = nullptr;
    bool ended_early = false;   // the body ended before fields added later: they keep their defaults

    bool take(size_t count) {
        if (failure != nullptr) return false;
        if (static_cast<size_t>(end - in) < count) {
            failure = "body ends inside a field";
            return false;
        }
        return true;
    }

    bool read_count(uint32_t& count, size_t element_bytes) {
        if (!take(4)) return false;
        count = load_le<uint32_t>(in);
        in += 4;
        if (element_bytes != 0 && count > static_cast<size_t>(end - in) / element_bytes) {
            failure = "length or count exceeds the body";
            return false;
        }
        return true;
    }

    void operator()(const LaterFields&) {
        if (failure == nullptr && in == end) ended_early = true;
    }

    template <class T>
    void operator()(T& value) {
        if (failure != nullptr || ended_early) return;
        if constexpr (std::is_same_v<T, bool>) {
            if (!take(1)) return;
            if (*in > 1) {
                failure = "boolean field is neither 0 nor 1";
                return;
            }
            value = *in++ == 1;
        } else if constexpr (Scalar<T>) {
            using Bits = decltype(scalar_bits(value));
            if (!take(sizeof(Bits))) return;
            value = static_cast<T>(load_le<Bits>(in));
            in += sizeof(Bits);
        } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::vector<uint8_t>>) {
            uint32_t length = 0;
            if (!read_count(length, 1)) return;
            value.assign(reinterpret_cast<const typename T::value_type*>(in),
                         reinterpret_cast<const typename T::value_type*>(in) + length);
            in += length;
        } else if constexpr (IsVector<T>::value) {
            using Element = typename T::value_type;
            uint32_t count = 0;
            // Bounding the count by the smallest possible element keeps a damaged count from
            // allocating gigabytes before the body runs out.
            if (!read_count(count, encoded_size_of_default<Element>())) return;
            value.resize(count);
            for (auto& element : value) {
                (*this)(element);
                if (failure != nullptr) return;
            }
        } else {
            fields(*this, value);
        }
    }
};

template <class T>
const char* decode_as(const uint8_t* body, size_t size, Event& out) {
    T event{};
    Decoder decoder{body, body + size};
    decoder(event);
    if (decoder.failure != nullptr) return decoder.failure;
    out.emplace<T>(std::move(event));
    return nullptr;
}

struct FieldCounter {
    size_t visited = 0;
    template <class T>
    void operator()(const T&) {
        if constexpr (!std::is_same_v<T, LaterFields>) ++visited;
    }
};

}  // namespace

template <class T>
size_t field_count() {
    FieldCounter counter;
    const T value{};
    fields(counter, value);
    return counter.visited;
}

template size_t field_count<Registers>();
template size_t field_count<Sample>();
template size_t field_count<MethodBci>();
template size_t field_count<PcScope>();
template size_t field_count<CodeLoad>();
template size_t field_count<CodeUnload>();
template size_t field_count<Stub>();
template size_t field_count<LineEntry>();
template size_t field_count<MethodInfo>();
template size_t field_count<CodeRange>();
template size_t field_count<VmInfo>();
template size_t field_count<Oracle>();
template size_t field_count<ThreadInfo>();
template size_t field_count<Lost>();
template size_t field_count<ModuleMap>();
template size_t field_count<JvmtiTrace>();
template size_t field_count<ProcessCpu>();
template size_t field_count<MethodEntry>();
template size_t field_count<MethodBatch>();
template size_t field_count<NamedMethod>();

bool is_known_kind(uint8_t kind) {
    return kind >= static_cast<uint8_t>(EventKind::kSample) && kind <= static_cast<uint8_t>(EventKind::kNamedMethod);
}

size_t body_size(const Event& event) {
    return std::visit(
        [](const auto& e) {
            Sizer sizer;
            sizer(e);
            return sizer.total;
        },
        event);
}

void encode_body(const Event& event, uint8_t* out) {
    std::visit(
        [out](const auto& e) {
            Encoder encoder{out};
            encoder(e);
        },
        event);
}

const char* decode_body(EventKind kind, const uint8_t* body, size_t size, Event& out) {
    switch (kind) {
        case EventKind::kSample: return decode_as<Sample>(body, size, out);
        case EventKind::kCodeLoad: return decode_as<CodeLoad>(body, size, out);
        case EventKind::kCodeUnload: return decode_as<CodeUnload>(body, size, out);
        case EventKind::kStub: return decode_as<Stub>(body, size, out);
        case EventKind::kMethod: return decode_as<MethodInfo>(body, size, out);
        case EventKind::kVmInfo: return decode_as<VmInfo>(body, size, out);
        case EventKind::kOracle: return decode_as<Oracle>(body, size, out);
        case EventKind::kThread: return decode_as<ThreadInfo>(body, size, out);
        case EventKind::kLost: return decode_as<Lost>(body, size, out);
        case EventKind::kModule: return decode_as<ModuleMap>(body, size, out);
        case EventKind::kJvmtiTrace: return decode_as<JvmtiTrace>(body, size, out);
        case EventKind::kProcessCpu: return decode_as<ProcessCpu>(body, size, out);
        case EventKind::kMethodBatch: return decode_as<MethodBatch>(body, size, out);
        case EventKind::kNamedMethod: return decode_as<NamedMethod>(body, size, out);
    }
    return "unknown event kind";
}

}  // namespace sf::event_codec
