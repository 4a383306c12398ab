// The calling context tree: decoded call traces merged into one tree of call-site-aware nodes with
// self and total counts, which every exporter (collapsed, html, pprof, json) and reader works on.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "stackfrag/base/flat_u64_map.hpp"
#include "stackfrag/base/huge_page_allocator.hpp"
#include "stackfrag/base/result.hpp"
#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/profile/method_names.hpp"

namespace sf::profile {

// What a node's frame is. Values 1-6 equal sf::FrameKind's; kThread and kTruncated are frames the
// profile adds itself; kJava is FrameKind::kJava (numbered after the older types, which keep theirs).
enum class FrameType : uint8_t {
    kRoot = 0,            // the tree's root, node 0, never written as a frame
    kInterpreted = 1,
    kCompiled = 2,
    kInlined = 3,
    kNativeWrapper = 4,
    kNative = 5,
    kStub = 6,
    kThread = 7,          // "[name tid=N]", the first frame of every stack in a per-thread tree
    kTruncated = 8,       // "[truncated]": the stacks below it lost their outer (root-side) frames
    kJava = 9,            // Java, how it ran not known (mode=jvmti): written without a kind suffix
    kFailed = 10,         // "[failed: reason]": the stacks below it are the top frames of a walk that failed
};

FrameType frame_type_of(FrameKind kind);
const char* frame_type_name(FrameType type);   // "root", "interpreted", ..., "thread", "truncated"
std::optional<FrameType> frame_type_from_name(std::string_view name);
// Java frames have a method, a signature and bcis; the others are named by a symbol.
bool is_java(FrameType type);
// Frames the profile adds itself (thread, "[truncated]", "[failed: ...]"): no method, no symbol.
bool is_marker(FrameType type);

// The synthetic frame that incomplete traces hang under. async-profiler appends a frame of the
// same name at the outer end of stacks it cut at its depth limit, so users know the convention.
inline constexpr std::string_view kTruncatedFrameName = "[truncated]";
// The marker that failed traces hang under: "[failed: bad_return_address]".
std::string failed_frame_name(FailReason reason);
// The reason a failed marker's name gives, if it is one.
std::optional<FailReason> failed_frame_reason(std::string_view name);

using FrameId = uint32_t;
using NodeId = uint32_t;
inline constexpr NodeId kRootNode = 0;
inline constexpr FrameId kRootFrame = 0;

// A frame as every output names it. Two frames are the same frame when type, name and signature
// are equal, so jmethodIDs of a redefined or reloaded class merge into one frame.
struct FrameDesc {
    FrameType type = FrameType::kNative;
    // Java: "java/lang/String.indexOf" (class in internal form, as async-profiler writes it);
    // native and stub: the symbol, "[unknown]" without one; thread: "[main tid=42]".
    std::string name;
    std::string signature;     // Java: "(I)I"; empty otherwise
    std::string source_file;   // Java: "String.java" as the class file says; empty when unknown
    int32_t first_line = 0;    // Java: smallest line of the method's line table; 0 when unknown
    bool operator==(const FrameDesc&) const = default;
};

// One calling context. Children are keyed by (frame, call_bci): the same callee called from two
// bytecodes of its caller is two nodes; Cct::children lists a node's. 56 bytes and no allocation of
// its own: the live tree of a 100 us profile grows by hundreds of thousands of nodes, each page of
// them a page fault.
struct Node {
    NodeId parent = kRootNode;   // the root is its own parent
    FrameId frame = kRootFrame;
    int32_t call_bci = -1;       // the bci in the parent frame that called this frame; -1 unknown
    int32_t call_line = 0;       // that bci's source line in the parent's method; 0 unknown
    uint32_t depth = 0;          // root 0, its children 1, ...
    uint64_t self_samples = 0;   // samples whose innermost frame is this node
    uint64_t total_samples = 0;  // samples in this node's subtree, itself included
    uint64_t self_weight = 0;    // the same, summing the weight (ns) passed to add()
    uint64_t total_weight = 0;
};

struct CctOptions {
    // Put a "[name tid=N]" frame (FrameType::kThread) under the root for every thread, so each
    // thread has its own subtree; off merges all threads.
    bool per_thread = false;
    // Keep every added sample's time, thread and innermost node (SampleRecord, 24 bytes each) for
    // outputs that list samples one by one (JFR). Off: only the counts are kept.
    bool keep_samples = false;
    // With per_thread: one subtree per thread pool instead, "[name]" with the name's trailing
    // number as '*' (thread_pool_name): a server's 200 request threads as one.
    bool per_pool = false;
};

// One sample as added, with keep_samples: when and on which thread it was taken, the node of its
// innermost frame, and that frame's bci and line (the tree keeps call sites only, not where the
// innermost frame was).
// A thread's name with its trailing digits as '*', the name its pool's threads share:
// "http-nio-8080-exec-12" -> "http-nio-8080-exec-*", "GC Thread#3" -> "GC Thread#*"; a name that
// ends in no digit stays as it is ("main").
std::string thread_pool_name(std::string_view thread_name);

struct SampleRecord {
    uint64_t time_ns = 0;    // CLOCK_MONOTONIC, as the trace's
    uint32_t tid = 0;
    NodeId node = 0;
    int32_t bci = -1;        // -1 unknown or not Java
    int32_t line = 0;        // 0 unknown
};

// Counts of the traces offered to add(), including those that were not added.
struct TraceCounts {
    uint64_t added = 0;        // complete + incomplete
    uint64_t incomplete = 0;   // added under "[truncated]"
    uint64_t failed = 0;       // in the tree too, under "[failed: reason]"
    std::array<uint64_t, static_cast<size_t>(FailReason::kCount)> failed_by_reason{};
};

// Facts about the whole profile that outputs show; readers restore them when the format has them.
struct ProfileInfo {
    std::string title;          // the html page's title; empty: the exporter picks one
    uint64_t period_ns = 0;     // sampling period; 0 unknown (pprof then has no cpu values)
    uint64_t start_unix_ns = 0; // 0 unknown
    uint64_t duration_ns = 0;   // 0 unknown
    // Samples taken but in no tree: the kernel's ring was full, or the live decoder's queue. The
    // outputs say so, as a profile with holes must not pass for a whole one.
    uint64_t lost_samples = 0;
    // Add to a sample's CLOCK_MONOTONIC time to get its Unix time (ns); 0 unknown.
    int64_t monotonic_to_unix_ns = 0;
    // The samples are context switches (events=switch: where threads left the CPU), not CPU time.
    bool off_cpu = false;
};

// Not thread-safe: one thread adds, or the caller locks. Node and frame ids are dense, start at 0
// (the root), are given in creation order and never change: a later add() or merge() only appends,
// and the json writer and reader keep them, so an id can stand for its calling context.
class Cct {
public:
    // `names` resolves the method ids of Java frames at add() time; it may be null when only the
    // builder calls below are used (readers) or traces carry only native frames.
    explicit Cct(const MethodNames* names = nullptr, CctOptions options = {});

    // Adds one sample of `weight` ns (0 when only counting) for the trace: incomplete ones go under
    // the frame "[truncated]", failed ones (the frames found before the failure) under
    // "[failed: reason]" (inside the thread's subtree when per_thread, and under the trace's root,
    // a non-Java thread's kind, when it has one), so every sample is in the tree. Returns the node
    // of the innermost frame (the marker's when a failed trace has none).
    std::optional<NodeId> add(const CallTrace& trace, uint64_t weight = 0);

    // The name thread frames get from now on; set it before the thread's first trace (a thread
    // frame keeps the name it was created with).
    void set_thread_name(uint32_t tid, std::string name);
    // The name set for `tid`, or null.
    const std::string* thread_name(uint32_t tid) const;
    // With keep_samples: every sample added, in the order added (empty otherwise; merge() and
    // the readers do not keep samples).
    const std::vector<SampleRecord>& samples() const { return samples_; }

    const CctOptions& options() const { return options_; }
    ProfileInfo& info() { return info_; }
    const ProfileInfo& info() const { return info_; }
    const TraceCounts& trace_counts() const { return counts_; }

    size_t node_count() const { return nodes_.size(); }
    const Node& node(NodeId id) const {
        if (unsettled_) settle();
        return nodes_[id];
    }
    size_t frame_count() const { return frames_.size(); }
    const FrameDesc& frame(FrameId id) const { return frames_[id]; }
    const FrameDesc& frame_of(NodeId id) const { return frames_[nodes_[id].frame]; }
    // A node's children in creation order. Valid until the tree changes (an index of every node's
    // children, built by the first call after a change: outputs read the tree whole).
    std::span<const NodeId> children(NodeId id) const;

    uint64_t total_samples() const { return node(kRootNode).total_samples; }
    uint64_t total_weight() const { return node(kRootNode).total_weight; }

    // The nodes from the root's child down to `id`, root-first (empty for the root itself).
    std::vector<NodeId> path(NodeId id) const;
    // The child of `parent` for (frame, call_bci), if there is one.
    std::optional<NodeId> child(NodeId parent, FrameId frame, int32_t call_bci) const;
    // The frame with this identity, if any node uses it.
    std::optional<FrameId> find_frame(FrameType type, std::string_view name,
                                      std::string_view signature = {}) const;
    // Every node whose path from the root has exactly these frame names, root-first (several
    // when call sites, signatures or frame types differ along the way).
    std::vector<NodeId> find(std::span<const std::string_view> names) const;
    std::vector<NodeId> find(std::initializer_list<std::string_view> names) const {
        return find(std::span<const std::string_view>(names.begin(), names.size()));
    }

    // Calls visitor(id, node) for every node in depth-first pre-order, children in creation
    // order; iterative, so deep stacks cannot overflow the caller's (maybe small JVM) stack.
    template <class Visitor>
    void visit(Visitor&& visitor) const {
        if (unsettled_) settle();
        std::vector<NodeId> pending{kRootNode};
        while (!pending.empty()) {
            NodeId id = pending.back();
            pending.pop_back();
            const Node& n = nodes_[id];
            visitor(id, n);
            const std::span<const NodeId> kids = children(id);
            for (auto it = kids.rbegin(); it != kids.rend(); ++it) pending.push_back(*it);
        }
    }

    // Adds every count of `other` into this tree: nodes are matched by (frame identity, call_bci)
    // along their path, new ones get new ids after the existing ones. Trace counts add up; this
    // tree's info and options stay.
    void merge(const Cct& other);

    // Java frames added while their method was announced without names (MethodBatch; the live
    // profile asks for names only for methods a profile refers to) are named "[unknown_method 0x..]"
    // until this renames them with what the names source says now, merging every calling context
    // that thereby becomes equal to another (call sites' lines are filled in too). Node and frame
    // ids may change; call it before reading names or ids (outputs). True when it changed anything.
    bool resolve_names();
    // The method ids of frames still waiting for names, ascending.
    std::vector<uint64_t> unnamed_methods() const;

    // --- Builder calls for readers and converters (json, collapsed, future formats) ---
    FrameId intern_frame(const FrameDesc& frame);
    // The child of `parent` for (frame, call_bci), created (with `call_line`) when missing.
    NodeId child_or_create(NodeId parent, FrameId frame, int32_t call_bci, int32_t call_line = 0);
    // Adds samples whose innermost frame is `leaf`: self there, total on it and every ancestor.
    // The ancestors' totals are summed when next read (node(), visit(), total_*()): a walk up
    // through every ancestor per sample was a cache miss per level.
    void add_samples(NodeId leaf, uint64_t samples, uint64_t weight = 0);
    TraceCounts& mutable_trace_counts() { return counts_; }

private:
    // (parent, frame, call_bci) -> child, open addressing with the key inline: one cache miss per
    // frame of a trace, where a node-based map took several. A child's slot is found from its
    // path's key (a hash of the frames and call sites from the root to it, node_keys_), not from
    // its parent's id: add() knows the keys of all a trace's new frames before it has any of their
    // nodes, and asks for their slots at once instead of one cache miss after the other.
    struct ChildSlot {
        NodeId parent;
        FrameId frame;
        int32_t call_bci;
        NodeId child;   // kNoChild when the slot is free
    };
    static constexpr NodeId kNoChild = UINT32_MAX;
    static uint64_t child_key(uint64_t parent_key, FrameId frame, int32_t call_bci);
    size_t child_slot(uint64_t key, NodeId parent, FrameId frame, int32_t call_bci) const;
    NodeId child_or_create_keyed(uint64_t key, NodeId parent, FrameId frame, int32_t call_bci, int32_t call_line);
    void grow_children();
    // The tree's arrays by node id (and its child table) grow to megabytes in a long or deep
    // profile: on huge pages once that large (HugePageAllocator says why).
    template <class T>
    using NodeArray = std::vector<T, HugePageAllocator<T>>;
    NodeArray<uint64_t> node_keys_;   // by node id, beside nodes_
    // add()'s per-trace scratch: each new frame's FrameId, whether it is stable, its key.
    struct NewFrame {
        FrameId frame;
        bool stable;
        uint64_t key;
    };
    std::vector<NewFrame> new_frames_;

    // `stable`: false when the frame may resolve otherwise later (a method not announced yet).
    FrameId java_frame(FrameType type, uint64_t method_id, bool& stable);
    FrameId symbol_frame(FrameType type, std::string_view symbol);
    FrameId symbol_frame(FrameType type, InternedName symbol);
    FrameId symbol_frame_at(FrameType type, uint64_t pc, InternedName symbol);
    // symbol_frame_at's answers by pc, direct-mapped (a new tree starts empty; resolve_names keeps
    // every frame id of a frame that is not Java).
    struct PcFrameSlot {
        uint64_t pc = 0;
        InternedName symbol;
        FrameId frame = kRootFrame;
        FrameType type = FrameType::kRoot;
    };
    static constexpr size_t kPcFrameSlots = 4096;
    std::vector<PcFrameSlot> pc_frames_;   // sized at the first use
    void cache_method_frame(uint64_t cache_key, FrameId id);
    // Frames of methods announced without names, by frame: what resolve_names() renames.
    std::unordered_map<FrameId, uint64_t> unnamed_frames_;
    NodeId thread_node(uint32_t tid);

    // symbol_frame's answers by type and name, looked up without building a key (a native frame's
    // name is hashed once per frame and never copied).
    struct NameHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::array<std::unordered_map<std::string, FrameId, NameHash, std::equal_to<>>, 11> symbol_frames_;
    // The same by interned name (a frame's symbol, a thread's root) and type, keyed by the name's
    // address (interned_frame_key): no string hashed.
    FlatU64Map<FrameId> interned_frames_;

    // The last trace add() took for each thread, outermost frame first, with the node each frame
    // got: a thread's next trace mostly shares its outer frames, whose nodes are taken from here
    // without resolving their frames or looking up children again. A frame whose resolution may
    // change (an unknown method) ends the part that can be taken.
    struct PathStep {
        FrameKind kind = FrameKind::kNative;
        int32_t bci = -1;
        uint64_t method_id = 0;
        InternedName symbol;
        NodeId node = kRootNode;
    };
    struct ThreadPath {
        // A non-Java thread's root frame (CallTrace::root) and the node it got under `root_parent`:
        // its next samples find it without looking up the child.
        InternedName root;
        NodeId root_parent = kNoChild;
        NodeId root_node = kNoChild;
        NodeId start = kNoChild;   // the node the first frame hangs under
        std::vector<PathStep> steps;
        size_t reusable = 0;       // steps [0, reusable) may be taken
    };
    std::unordered_map<uint32_t, ThreadPath> paths_;

    const MethodNames* names_;
    CctOptions options_;
    ProfileInfo info_;
    TraceCounts counts_;
    // Totals are kept up to date lazily: add_samples() counts at the leaf only and leaves the
    // ancestors' share in unsettled_ (samples, weight per node, not yet in the node's totals nor
    // passed to its parent), which settle() adds up in one pass from the last node to the root
    // (a node's parent always has the smaller id). Both are mutable: reading settles.
    mutable NodeArray<Node> nodes_;
    struct Unsettled {
        uint64_t samples = 0;
        uint64_t weight = 0;
    };
    mutable NodeArray<Unsettled> unsettled_by_node_;
    mutable bool unsettled_ = false;
    void settle() const;
    // children(): node id -> [child_begin_[id], child_begin_[id + 1]) in child_ids_, for the first
    // children_indexed_ nodes (nodes are only ever appended; a rebuilt tree starts without).
    mutable std::vector<uint32_t> child_begin_;
    mutable std::vector<NodeId> child_ids_;
    mutable size_t children_indexed_ = 0;
    std::vector<FrameDesc> frames_;
    std::unordered_map<std::string, FrameId> frame_ids_;   // identity key -> frame
    NodeArray<ChildSlot> child_slots_;   // size a power of two, at most half full
    size_t child_count_ = 0;
    // (method id, type) -> frame. A jmethodID names one method (class, name, signature) for the
    // JVM's whole life and HotSpot never reuses one, so an id once resolved needs no new lookup.
    // Open addressing with the key inline (0: free; a key has the type, never 0, in its low bits),
    // at most half full: one cache miss per lookup, where a node-based map took two and a division.
    struct MethodFrameSlot {
        uint64_t key = 0;
        FrameId frame = kRootFrame;
    };
    std::vector<MethodFrameSlot> method_frames_;
    size_t method_frame_count_ = 0;
    size_t method_frame_slot(uint64_t key) const;
    std::unordered_map<uint32_t, std::string> thread_names_;
    std::vector<SampleRecord> samples_;
    void record_sample(const CallTrace& trace, NodeId leaf);
    std::array<FrameId, static_cast<size_t>(FailReason::kCount)> failed_markers_{};   // by reason, once interned
    std::unordered_map<uint32_t, NodeId> thread_nodes_;
};

// The identity key interning uses; exposed so readers and tests can reason about merging.
std::string frame_identity(FrameType type, std::string_view name, std::string_view signature);

}  // namespace sf::profile
