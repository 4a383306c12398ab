#include "stackfrag/profile/cct.hpp"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

namespace sf::profile {

FrameType frame_type_of(FrameKind kind) {
    if (kind == FrameKind::kJava) return FrameType::kJava;
    return static_cast<FrameType>(static_cast<uint8_t>(kind));
}

const char* frame_type_name(FrameType type) {
    switch (type) {
        case FrameType::kRoot: return "root";
        case FrameType::kInterpreted: return "interpreted";
        case FrameType::kCompiled: return "compiled";
        case FrameType::kInlined: return "inlined";
        case FrameType::kNativeWrapper: return "native_wrapper";
        case FrameType::kNative: return "native";
        case FrameType::kStub: return "stub";
        case FrameType::kThread: return "thread";
        case FrameType::kTruncated: return "truncated";
        case FrameType::kJava: return "java";
        case FrameType::kFailed: return "failed";
    }
    return "unknown";
}

std::optional<FrameType> frame_type_from_name(std::string_view name) {
    for (uint8_t v = 0; v <= static_cast<uint8_t>(FrameType::kFailed); ++v) {
        auto type = static_cast<FrameType>(v);
        if (name == frame_type_name(type)) {
            return type;
        }
    }
    return std::nullopt;
}

bool is_java(FrameType type) {
    return type == FrameType::kInterpreted || type == FrameType::kCompiled || type == FrameType::kInlined ||
           type == FrameType::kNativeWrapper || type == FrameType::kJava;
}

bool is_marker(FrameType type) {
    return type == FrameType::kThread || type == FrameType::kTruncated || type == FrameType::kFailed;
}

std::string failed_frame_name(FailReason reason) { return fmt::format("[failed: {}]", fail_reason_name(reason)); }

std::optional<FailReason> failed_frame_reason(std::string_view name) {
    constexpr std::string_view kPrefix = "[failed: ";
    if (!name.starts_with(kPrefix) || !name.ends_with(']')) return std::nullopt;
    const std::string_view reason = name.substr(kPrefix.size(), name.size() - kPrefix.size() - 1);
    for (size_t r = 0; r < static_cast<size_t>(FailReason::kCount); ++r) {
        if (reason == fail_reason_name(static_cast<FailReason>(r))) return static_cast<FailReason>(r);
    }
    return std::nullopt;
}

std::string frame_identity(FrameType type, std::string_view name, std::string_view signature) {
    std::string key;
    key.reserve(name.size() + signature.size() + 3);
    key.push_back(static_cast<char>('0' + static_cast<int>(type)));
    key.push_back('\0');
    key.append(name);
    key.push_back('\0');
    key.append(signature);
    return key;
}

uint64_t Cct::child_key(uint64_t parent_key, FrameId frame, int32_t call_bci) {
    uint64_t h = parent_key ^ (uint64_t{frame} << 32 | static_cast<uint32_t>(call_bci));
    h *= 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return h;
}

size_t Cct::child_slot(uint64_t key, NodeId parent, FrameId frame, int32_t call_bci) const {
    const size_t mask = child_slots_.size() - 1;
    for (size_t i = key & mask;; i = (i + 1) & mask) {
        const ChildSlot& slot = child_slots_[i];
        if (slot.child == kNoChild ||
            (slot.parent == parent && slot.frame == frame && slot.call_bci == call_bci)) {
            return i;
        }
    }
}

void Cct::grow_children() {
    NodeArray<ChildSlot> old = std::move(child_slots_);
    child_slots_.assign(old.empty() ? 1024 : old.size() * 2, ChildSlot{0, 0, 0, kNoChild});
    for (const ChildSlot& slot : old) {
        if (slot.child != kNoChild) {
            child_slots_[child_slot(node_keys_[slot.child], slot.parent, slot.frame, slot.call_bci)] = slot;
        }
    }
}

Cct::Cct(const MethodNames* names, CctOptions options) : names_(names), options_(options) {
    frames_.push_back(FrameDesc{FrameType::kRoot, "[root]", {}, {}, 0});
    frame_ids_.emplace(frame_identity(FrameType::kRoot, "[root]", {}), kRootFrame);
    nodes_.push_back(Node{});
    node_keys_.push_back(0x243F6A8885A308D3ull);
    grow_children();
}

FrameId Cct::intern_frame(const FrameDesc& frame) {
    auto [it, inserted] =
        frame_ids_.try_emplace(frame_identity(frame.type, frame.name, frame.signature), FrameId{0});
    if (inserted) {
        it->second = static_cast<FrameId>(frames_.size());
        frames_.push_back(frame);
    } else {
        // The first description wins, but a reader that learns a file or line later fills gaps.
        FrameDesc& known = frames_[it->second];
        if (known.source_file.empty()) known.source_file = frame.source_file;
        if (known.first_line == 0) known.first_line = frame.first_line;
    }
    return it->second;
}

NodeId Cct::child_or_create(NodeId parent, FrameId frame, int32_t call_bci, int32_t call_line) {
    return child_or_create_keyed(child_key(node_keys_[parent], frame, call_bci), parent, frame, call_bci, call_line);
}

NodeId Cct::child_or_create_keyed(uint64_t key, NodeId parent, FrameId frame, int32_t call_bci, int32_t call_line) {
    size_t at = child_slot(key, parent, frame, call_bci);
    if (child_slots_[at].child != kNoChild) return child_slots_[at].child;
    NodeId id = static_cast<NodeId>(nodes_.size());
    child_slots_[at] = ChildSlot{parent, frame, call_bci, id};
    node_keys_.push_back(key);
    if (++child_count_ * 2 > child_slots_.size()) grow_children();
    Node n;
    n.parent = parent;
    n.frame = frame;
    n.call_bci = call_bci;
    n.call_line = call_line;
    n.depth = nodes_[parent].depth + 1;
    nodes_.push_back(std::move(n));
    return id;
}

void Cct::add_samples(NodeId leaf, uint64_t samples, uint64_t weight) {
    nodes_[leaf].self_samples += samples;
    nodes_[leaf].self_weight += weight;
    if (unsettled_by_node_.size() < nodes_.size()) unsettled_by_node_.resize(nodes_.capacity());
    unsettled_by_node_[leaf].samples += samples;
    unsettled_by_node_[leaf].weight += weight;
    unsettled_ = true;
}

std::span<const NodeId> Cct::children(NodeId id) const {
    if (children_indexed_ != nodes_.size()) {
        // Counting sort by parent over the nodes in id order: each list in creation order.
        const size_t n = nodes_.size();
        child_begin_.assign(n + 1, 0);
        for (NodeId c = 1; c < n; ++c) ++child_begin_[nodes_[c].parent + 1];
        for (size_t i = 0; i < n; ++i) child_begin_[i + 1] += child_begin_[i];
        child_ids_.resize(n > 0 ? n - 1 : 0);
        std::vector<uint32_t> next(child_begin_.begin(), child_begin_.end() - 1);
        for (NodeId c = 1; c < n; ++c) child_ids_[next[nodes_[c].parent]++] = c;
        children_indexed_ = n;
    }
    return {child_ids_.data() + child_begin_[id], child_begin_[id + 1] - child_begin_[id]};
}

void Cct::settle() const {
    // Children have larger ids than their parents: from the last node down, each passes what it
    // gathered (its own and its subtree's) on to its parent before the parent is reached.
    const size_t n = std::min(unsettled_by_node_.size(), nodes_.size());
    for (size_t id = n; id-- > 0;) {
        Unsettled& u = unsettled_by_node_[id];
        if (u.samples == 0 && u.weight == 0) continue;
        Node& node = nodes_[id];
        node.total_samples += u.samples;
        node.total_weight += u.weight;
        if (id != kRootNode) {
            Unsettled& up = unsettled_by_node_[node.parent];
            up.samples += u.samples;
            up.weight += u.weight;
        }
        u = {};
    }
    unsettled_ = false;
}

std::optional<NodeId> Cct::child(NodeId parent, FrameId frame, int32_t call_bci) const {
    NodeId found = child_slots_[child_slot(child_key(node_keys_[parent], frame, call_bci), parent, frame, call_bci)].child;
    if (found == kNoChild) return std::nullopt;
    return found;
}

std::optional<FrameId> Cct::find_frame(FrameType type, std::string_view name, std::string_view signature) const {
    auto it = frame_ids_.find(frame_identity(type, name, signature));
    if (it == frame_ids_.end()) return std::nullopt;
    return it->second;
}

std::vector<NodeId> Cct::path(NodeId id) const {
    std::vector<NodeId> out;
    while (id != kRootNode) {
        out.push_back(id);
        id = nodes_[id].parent;
    }
    return {out.rbegin(), out.rend()};
}

std::vector<NodeId> Cct::find(std::span<const std::string_view> names) const {
    std::vector<NodeId> level{kRootNode};
    for (std::string_view name : names) {
        std::vector<NodeId> next;
        for (NodeId parent : level) {
            for (NodeId c : children(parent)) {
                if (frames_[nodes_[c].frame].name == name) next.push_back(c);
            }
        }
        level = std::move(next);
        if (level.empty()) break;
    }
    if (names.empty()) return {};
    return level;
}

void Cct::set_thread_name(uint32_t tid, std::string name) {
    // A thread named after its first samples (or a new thread with an old one's tid): its later
    // samples go under the name; the earlier ones stay where they are.
    auto known = thread_names_.find(tid);
    if (known == thread_names_.end() || known->second != name) thread_nodes_.erase(tid);
    thread_names_[tid] = std::move(name);
}

const std::string* Cct::thread_name(uint32_t tid) const {
    auto found = thread_names_.find(tid);
    return found == thread_names_.end() ? nullptr : &found->second;
}

void Cct::record_sample(const CallTrace& trace, NodeId leaf) {
    SampleRecord record{trace.time_ns, trace.tid, leaf, -1, 0};
    if (!trace.frames.empty() && is_java(frame_type_of(trace.frames.front().kind))) {
        const Frame& top = trace.frames.front();
        record.bci = top.bci;
        if (top.bci >= 0 && names_ != nullptr) {
            if (const MethodInfo* method = names_->find(top.method_id)) record.line = line_for_bci(*method, top.bci);
        }
    }
    samples_.push_back(record);
}

size_t Cct::method_frame_slot(uint64_t key) const {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    const size_t mask = method_frames_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        if (method_frames_[i].key == key || method_frames_[i].key == 0) return i;
    }
}

namespace {

// A Java frame as the method's names describe it.
FrameDesc named_frame(FrameType type, const MethodInfo& info) {
    FrameDesc desc;
    desc.type = type;
    desc.name.reserve(info.class_name.size() + info.name.size() + 1);
    desc.name.append(info.class_name).append(".").append(info.name);
    desc.signature = info.signature;
    desc.source_file = info.source_file;
    desc.first_line = first_line(info);
    return desc;
}

}  // namespace

FrameId Cct::java_frame(FrameType type, uint64_t method_id, bool& stable) {
    stable = true;
    // The type in the low bits: never 0, the free slot's key.
    const uint64_t cache_key = method_id * 16 + static_cast<uint64_t>(type);
    if (!method_frames_.empty()) {
        const MethodFrameSlot& slot = method_frames_[method_frame_slot(cache_key)];
        if (slot.key == cache_key) return slot.frame;
    }
    const MethodInfo* info = names_ != nullptr ? names_->find(method_id) : nullptr;
    if (info == nullptr || info->name.empty()) {
        // A frame per id, so unrelated unknown methods do not merge.
        FrameDesc desc;
        desc.type = type;
        desc.name = fmt::format("[unknown_method 0x{:x}]", method_id);
        if (info == nullptr) {
            // Not announced (yet). Not cached, because the MethodInfo may still arrive.
            stable = false;
            return intern_frame(desc);
        }
        // Announced without names (a MethodBatch): cached under this name until resolve_names()
        // gives it the one a NamedMethod brings.
        const FrameId id = intern_frame(desc);
        unnamed_frames_.emplace(id, method_id);
        cache_method_frame(cache_key, id);
        return id;
    }
    const FrameId id = intern_frame(named_frame(type, *info));
    cache_method_frame(cache_key, id);
    return id;
}

void Cct::cache_method_frame(uint64_t cache_key, FrameId id) {
    if ((method_frame_count_ + 1) * 2 > method_frames_.size()) {
        std::vector<MethodFrameSlot> old = std::move(method_frames_);
        method_frames_.assign(old.empty() ? 1024 : old.size() * 2, MethodFrameSlot{});
        for (const MethodFrameSlot& slot : old) {
            if (slot.key != 0) method_frames_[method_frame_slot(slot.key)] = slot;
        }
    }
    method_frames_[method_frame_slot(cache_key)] = MethodFrameSlot{cache_key, id};
    ++method_frame_count_;
}

std::vector<uint64_t> Cct::unnamed_methods() const {
    std::vector<uint64_t> ids;
    ids.reserve(unnamed_frames_.size());
    for (const auto& [frame, method_id] : unnamed_frames_) ids.push_back(method_id);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
}

bool Cct::resolve_names() {
    if (unnamed_frames_.empty() || names_ == nullptr) return false;
    // The frames whose method has a name now, with it.
    std::unordered_map<FrameId, const MethodInfo*> named;
    for (const auto& [frame, method_id] : unnamed_frames_) {
        const MethodInfo* info = names_->find(method_id);
        if (info != nullptr && !info->name.empty()) named.emplace(frame, info);
    }
    if (named.empty()) return false;
    if (unsettled_) settle();

    // The names each renamed frame gets; where none equals another frame's, the frames are renamed
    // where they are and no context merges (nearly always: a rebuild of a 1 kHz profile's tree
    // cost more than the names saved).
    std::unordered_map<FrameId, FrameDesc> renamed_to;
    std::unordered_set<std::string> new_keys;
    bool collides = false;
    for (const auto& [frame, info] : named) {
        FrameDesc desc = named_frame(frames_[frame].type, *info);
        std::string key = frame_identity(desc.type, desc.name, desc.signature);
        collides = collides || frame_ids_.contains(key) || !new_keys.insert(key).second;
        renamed_to.emplace(frame, std::move(desc));
    }
    // The renamed frames' methods by frame id: one pass over every node without a hash lookup each.
    // Call sites under a renamed frame, and kept samples in one, get the line its table now gives.
    std::vector<const MethodInfo*> info_of(frames_.size(), nullptr);
    for (const auto& [frame, info] : named) info_of[frame] = info;
    const auto call_line_of = [&](const Node& n) {
        const MethodInfo* parent = info_of[nodes_[n.parent].frame];
        return parent != nullptr && n.call_bci >= 0 ? line_for_bci(*parent, n.call_bci) : n.call_line;
    };
    const auto fill_sample_lines = [&](std::vector<SampleRecord>& records) {
        for (SampleRecord& record : records) {
            if (const MethodInfo* info = info_of[nodes_[record.node].frame]; info != nullptr && record.bci >= 0) {
                record.line = line_for_bci(*info, record.bci);
            }
        }
    };
    if (!collides) {
        for (auto& [frame, desc] : renamed_to) {
            frame_ids_.erase(frame_identity(frames_[frame].type, frames_[frame].name, frames_[frame].signature));
            frame_ids_.emplace(frame_identity(desc.type, desc.name, desc.signature), frame);
            frames_[frame] = std::move(desc);
            unnamed_frames_.erase(frame);
        }
        for (NodeId id = 1; id < nodes_.size(); ++id) nodes_[id].call_line = call_line_of(nodes_[id]);
        fill_sample_lines(samples_);
        return true;
    }

    // A new tree, built from this one in id order (parents first), as merge() would, but with the
    // renamed frames: contexts that differed only by the placeholder merge with their named twin.
    Cct out(names_, options_);
    out.info_ = info_;
    out.counts_ = counts_;
    out.thread_names_ = thread_names_;
    std::vector<FrameId> frame_map(frames_.size());
    for (FrameId f = 0; f < frames_.size(); ++f) {
        const auto renamed = renamed_to.find(f);
        frame_map[f] = out.intern_frame(renamed == renamed_to.end() ? frames_[f] : renamed->second);
    }
    for (const auto& [frame, method_id] : unnamed_frames_) {
        if (!named.contains(frame)) out.unnamed_frames_.emplace(frame_map[frame], method_id);
    }
    std::vector<NodeId> node_map(nodes_.size(), kRootNode);
    for (NodeId id = 1; id < nodes_.size(); ++id) {
        const Node& n = nodes_[id];
        node_map[id] = out.child_or_create(node_map[n.parent], frame_map[n.frame], n.call_bci, call_line_of(n));
        if (n.self_samples != 0 || n.self_weight != 0) out.add_samples(node_map[id], n.self_samples, n.self_weight);
    }
    for (const auto& [tid, node] : thread_nodes_) out.thread_nodes_.emplace(tid, node_map[node]);
    for (size_t k = 0; k < symbol_frames_.size(); ++k) {
        for (const auto& [name, frame] : symbol_frames_[k]) out.symbol_frames_[k].emplace(name, frame_map[frame]);
    }
    for (size_t r = 0; r < failed_markers_.size(); ++r) {
        if (failed_markers_[r] != kRootFrame) out.failed_markers_[r] = frame_map[failed_markers_[r]];
    }
    fill_sample_lines(samples_);
    out.samples_ = std::move(samples_);
    for (SampleRecord& record : out.samples_) record.node = node_map[record.node];
    *this = std::move(out);
    return true;
}

FrameId Cct::symbol_frame_at(FrameType type, uint64_t pc, InternedName symbol) {
    // A pc keeps its symbol nearly always: the frame last found for this pc is taken when the
    // symbol is the same (one pointer compare).
    if (pc == 0) return symbol_frame(type, symbol);
    if (pc_frames_.empty()) pc_frames_.resize(kPcFrameSlots);
    PcFrameSlot& slot = pc_frames_[((pc >> 2) ^ (pc >> 13) ^ static_cast<uint64_t>(type)) & (kPcFrameSlots - 1)];
    if (slot.pc == pc && slot.type == type && slot.symbol == symbol) return slot.frame;
    const FrameId id = symbol_frame(type, symbol);
    slot = PcFrameSlot{pc, symbol, id, type};
    return id;
}

FrameId Cct::symbol_frame(FrameType type, InternedName symbol) {
    // Distinct and non-zero for every (name, type): addresses are below 2^60, types below 16.
    static_assert(static_cast<int>(FrameType::kFailed) < 16);
    const uint64_t key = ((reinterpret_cast<uint64_t>(symbol.key()) << 4) | static_cast<uint64_t>(type)) + 1;
    if (const FrameId* known = interned_frames_.find(key)) return *known;
    const FrameId id = symbol_frame(type, symbol.view());
    interned_frames_.try_emplace(key, id);
    return id;
}

FrameId Cct::symbol_frame(FrameType type, std::string_view symbol) {
    const std::string_view name = symbol.empty() ? std::string_view("[unknown]") : symbol;
    auto& known = symbol_frames_[static_cast<size_t>(type) % symbol_frames_.size()];
    if (auto it = known.find(name); it != known.end()) return it->second;
    FrameDesc desc;
    desc.type = type;
    desc.name = name;
    const FrameId id = intern_frame(desc);
    known.emplace(desc.name, id);
    return id;
}

std::string thread_pool_name(std::string_view thread_name) {
    size_t end = thread_name.size();
    while (end > 0 && thread_name[end - 1] >= '0' && thread_name[end - 1] <= '9') --end;
    if (end == thread_name.size()) return std::string(thread_name);
    return std::string(thread_name.substr(0, end)) + "*";
}

NodeId Cct::thread_node(uint32_t tid) {
    auto known = thread_nodes_.find(tid);
    if (known != thread_nodes_.end()) return known->second;
    FrameDesc desc;
    desc.type = FrameType::kThread;
    auto name = thread_names_.find(tid);
    const bool named = name != thread_names_.end() && !name->second.empty();
    if (options_.per_pool) {
        desc.name = named ? fmt::format("[{}]", thread_pool_name(name->second)) : std::string("[unnamed threads]");
    } else {
        desc.name = named ? fmt::format("[{} tid={}]", name->second, tid) : fmt::format("[tid={}]", tid);
    }
    NodeId id = child_or_create(kRootNode, intern_frame(desc), -1, 0);
    thread_nodes_[tid] = id;
    return id;
}

std::optional<NodeId> Cct::add(const CallTrace& trace, uint64_t weight) {
    constexpr size_t kMaxThreadPaths = 4096;   // bounded, whatever the thread ids
    if (paths_.size() >= kMaxThreadPaths && !paths_.contains(trace.tid)) paths_.clear();
    ThreadPath& path = paths_[trace.tid];
    NodeId at = options_.per_thread ? thread_node(trace.tid) : kRootNode;
    // A non-Java thread's kind ("[GC Thread]"): its stacks sit beside the application's. Its node
    // for this parent never changes (frames and nodes are never removed).
    if (!trace.root.empty()) {
        if (path.root_parent != at || path.root != trace.root) {
            path.root_node = child_or_create(at, symbol_frame(FrameType::kNative, trace.root), -1, 0);
            path.root_parent = at;
            path.root = trace.root;
        }
        at = path.root_node;
    }
    if (trace.status == TraceStatus::kFailed) {
        counts_.failed++;
        size_t reason = static_cast<size_t>(trace.failure);
        if (reason < counts_.failed_by_reason.size()) counts_.failed_by_reason[reason]++;
        if (reason >= failed_markers_.size()) reason = 0;
        if (failed_markers_[reason] == kRootFrame) {
            const FailReason why = reason == 0 ? FailReason::kNone : static_cast<FailReason>(reason);
            failed_markers_[reason] = intern_frame(FrameDesc{FrameType::kFailed, failed_frame_name(why), {}, {}, 0});
        }
        at = child_or_create(at, failed_markers_[reason], -1, 0);
    } else {
        counts_.added++;
        if (trace.status == TraceStatus::kIncomplete) {
            counts_.incomplete++;
            FrameDesc marker{FrameType::kTruncated, std::string(kTruncatedFrameName), {}, {}, 0};
            at = child_or_create(at, intern_frame(marker), -1, 0);
        }
    }

    // The outer frames this thread's last trace had too, at the same place in the tree: their
    // nodes are known. A frame's node depends on it and the frames outside it (and on the bci of
    // the one just outside), so equal frames from the outermost on give equal nodes.
    const size_t n = trace.frames.size();
    size_t taken = 0;
    if (path.start == at) {
        for (; taken < path.reusable && taken < n; ++taken) {
            const PathStep& step = path.steps[taken];
            const Frame& f = trace.frames[n - 1 - taken];
            if (step.kind != f.kind || step.bci != f.bci || step.method_id != f.method_id || step.symbol != f.symbol) break;
        }
    }
    path.start = at;
    path.steps.resize(n);
    if (path.reusable > taken) path.reusable = taken;

    // Resolve outermost first: a frame's call site is the bci of the frame after it in the list.
    // The caller's line table is only looked up when a new node needs the call site's line.
    uint64_t caller_method = 0;
    int32_t caller_bci = -1;
    if (taken > 0) {
        const Frame& f = trace.frames[n - taken];
        const bool java = is_java(frame_type_of(f.kind));
        at = path.steps[taken - 1].node;
        caller_method = java ? f.method_id : 0;
        caller_bci = java && f.bci >= 0 ? f.bci : -1;
    }
    bool stable_so_far = path.reusable == taken;
    // The new frames' FrameIds, in order (interning is as one by one), then their path keys, whose
    // slots are all asked for before the first is needed: each frame's node was a cache miss that
    // waited for the one before it.
    new_frames_.clear();
    {
        int32_t bci = caller_bci;
        uint64_t key = node_keys_[at];
        for (size_t k = taken; k < n; ++k) {
            const Frame& f = trace.frames[n - 1 - k];
            const FrameType type = frame_type_of(f.kind);
            const bool java = is_java(type);
            bool stable = true;
            const FrameId frame = java ? java_frame(type, f.method_id, stable) : symbol_frame_at(type, f.pc, f.symbol);
            key = child_key(key, frame, bci);
            new_frames_.push_back(NewFrame{frame, stable, key});
            __builtin_prefetch(&child_slots_[key & (child_slots_.size() - 1)]);
            bci = java && f.bci >= 0 ? f.bci : -1;
        }
    }
    for (size_t k = taken; k < n; ++k) {
        const Frame& f = trace.frames[n - 1 - k];
        const NewFrame& nf = new_frames_[k - taken];
        FrameType type = frame_type_of(f.kind);
        bool java = is_java(type);
        const bool stable = nf.stable;
        const FrameId frame = nf.frame;
        size_t before = nodes_.size();
        at = child_or_create_keyed(nf.key, at, frame, caller_bci, 0);
        if (nodes_.size() != before && caller_bci >= 0 && names_ != nullptr) {
            if (const MethodInfo* caller = names_->find(caller_method)) nodes_[at].call_line = line_for_bci(*caller, caller_bci);
        }
        caller_method = java ? f.method_id : 0;
        caller_bci = java && f.bci >= 0 ? f.bci : -1;
        PathStep& step = path.steps[k];
        step.kind = f.kind;
        step.bci = f.bci;
        step.method_id = f.method_id;
        step.symbol = f.symbol;
        step.node = at;
        stable_so_far = stable_so_far && stable;
        if (stable_so_far) path.reusable = k + 1;
    }
    add_samples(at, 1, weight);
    if (options_.keep_samples) record_sample(trace, at);
    return at;
}

void Cct::merge(const Cct& other) {
    if (other.unsettled_) other.settle();
    std::vector<FrameId> frame_map(other.frames_.size());
    for (size_t i = 0; i < other.frames_.size(); ++i) {
        frame_map[i] = intern_frame(other.frames_[i]);
    }
    // Parents have smaller ids than their children, so one pass in id order maps every parent first.
    std::vector<NodeId> node_map(other.nodes_.size(), kRootNode);
    for (NodeId id = 0; id < other.nodes_.size(); ++id) {
        const Node& n = other.nodes_[id];
        NodeId mine = id == kRootNode
                          ? kRootNode
                          : child_or_create(node_map[n.parent], frame_map[n.frame], n.call_bci, n.call_line);
        node_map[id] = mine;
        Node& m = nodes_[mine];
        m.self_samples += n.self_samples;
        m.self_weight += n.self_weight;
        m.total_samples += n.total_samples;
        m.total_weight += n.total_weight;
    }
    counts_.added += other.counts_.added;
    counts_.incomplete += other.counts_.incomplete;
    counts_.failed += other.counts_.failed;
    for (size_t i = 0; i < counts_.failed_by_reason.size(); ++i) {
        counts_.failed_by_reason[i] += other.counts_.failed_by_reason[i];
    }
}

}  // namespace sf::profile
