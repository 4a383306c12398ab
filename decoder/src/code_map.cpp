#include "stackfrag/decoder/code_map.hpp"

#include <algorithm>

#include "code_shape.hpp"
#include "live_code_index.hpp"
#include "vm_stubs.hpp"

namespace sf {

// A run announces 10-25 k methods, most of them in its first seconds: reserved, the two maps are
// not rehashed a dozen times while they fill (each rehash relinks every node, a cache miss apiece).
CodeMap::CodeMap() : live_index_(std::make_unique<detail::LiveCodeIndex<CompiledCode>>()) {
    methods_by_id_.reserve(kExpectedMethods);
    single_version_by_ptr_.reserve(kExpectedMethods);
}
CodeMap::~CodeMap() = default;

void CodeMap::apply(const Event& event) { apply_any(event); }

void CodeMap::apply(Event&& event) { apply_any(std::move(event)); }

template <class E>
void CodeMap::apply_any(E&& event) {
    std::visit(
        [this](auto&& e) {
            using T = std::decay_t<decltype(e)>;
            if constexpr (std::is_same_v<T, VmInfo>) apply_vm(e);
            else if constexpr (std::is_same_v<T, CodeLoad>) apply_load(CodeLoad(std::forward<decltype(e)>(e)));
            else if constexpr (std::is_same_v<T, CodeUnload>) apply_unload(e);
            else if constexpr (std::is_same_v<T, Stub>) apply_stub(e);
            else if constexpr (std::is_same_v<T, MethodInfo>) apply_method(MethodInfo(std::forward<decltype(e)>(e)));
            else if constexpr (std::is_same_v<T, ModuleMap>) apply_module(e);
            else if constexpr (std::is_same_v<T, MethodBatch>) return apply_batch(e);
            else if constexpr (std::is_same_v<T, NamedMethod>) return apply_names(NamedMethod(std::forward<decltype(e)>(e)));
            else return;
            ++epoch_;
            if constexpr (!std::is_same_v<T, MethodInfo> && !std::is_same_v<T, ModuleMap>) ++code_generation_;
            if constexpr (std::is_same_v<T, VmInfo> || std::is_same_v<T, ModuleMap>) applying_everything_ = true;
            note_change();
            // Validity intervals and Method* versions begin and end at these events' times (a
            // retired entry's end is the time of the load or unload that retired it).
            if constexpr (std::is_same_v<T, CodeLoad> || std::is_same_v<T, CodeUnload> ||
                          std::is_same_v<T, MethodInfo>) {
                time_horizon_ = std::max(time_horizon_, e.time_ns);
            }
        },
        std::forward<E>(event));
}

void CodeMap::apply_vm(const VmInfo& vm) {
    vm_ = vm;
    has_vm_ = true;
    jdk_ = &hotspot::recorded_jdk_facts(static_cast<int>(vm.layout), vm.jdk_major);
    entry_codelets_.clear();
    for (const auto& c : vm.entry_codelets) {
        if (c.end > c.begin) entry_codelets_.emplace_back(c.begin, c.end);
    }
    std::sort(entry_codelets_.begin(), entry_codelets_.end());
    live_index_->reserve(vm.code_cache_low, vm.code_cache_high);
}

bool CodeMap::in_method_entry_codelet(uint64_t pc) const {
    auto it = std::upper_bound(entry_codelets_.begin(), entry_codelets_.end(),
                               std::make_pair(pc, kForever));
    if (it == entry_codelets_.begin()) return false;
    --it;
    return pc >= it->first && pc < it->second;
}

void CodeMap::derive_continuation_return(const CodeLoad& load) {
    if (thaw_stub_ == 0 || load.kind != CodeKind::kNativeWrapper) return;
    if (const uint64_t ret = detail::return_after_call_to(load, thaw_stub_); ret != 0) derived_continuation_return_pc_ = ret;
}

void CodeMap::retire(std::shared_ptr<CompiledCode> code, uint64_t until) {
    if (derived_continuation_return_pc_ - code->load.code_begin < code->load.code_end - code->load.code_begin) {
        derived_continuation_return_pc_ = 0;
    }
    code->valid_until = std::min(code->valid_until, std::max(until, code->valid_from));
    const auto pos = std::upper_bound(history_ranges_.begin(), history_ranges_.end(), code->load.code_begin,
                                      [](uint64_t b, const HistoryRange& r) { return b < r.begin; });
    const size_t index = static_cast<size_t>(pos - history_ranges_.begin());
    history_ranges_.insert(pos, HistoryRange{code->load.code_begin, code->load.code_end});
    history_.insert(history_.begin() + static_cast<std::ptrdiff_t>(index), std::move(code));
    rebuild_history_reach(index);
}

void CodeMap::apply_load(CodeLoad&& load) {
    if (load.code_end <= load.code_begin) return;
    // Whatever still overlaps the new range was freed before it was reused, even if its unload
    // event is still on the way.
    auto it = live_.lower_bound(load.code_begin);
    if (it != live_.begin()) {
        auto prev = std::prev(it);
        if (prev->second->load.code_end > load.code_begin) it = prev;
    }
    loaded_lo_ = std::min(loaded_lo_, load.code_begin);
    loaded_hi_ = std::max(loaded_hi_, load.code_end);
    note_code_range(load.code_begin, load.code_end);
    while (it != live_.end() && it->first < load.code_end) {
        note_code_range(it->second->load.code_begin, it->second->load.code_end);
        live_index_->erase(it->second->load.code_begin, it->second->load.code_end, it->second.get());
        retire(it->second, load.time_ns);
        it = live_.erase(it);
    }
    auto code = std::make_shared<CompiledCode>();
    code->load = std::move(load);
    // HotSpot keeps PcDescs in pc order: checked rather than sorted (a sort of thousands of scopes
    // per load was 2 % of the decoder thread at 100/s); where equal offsets repeat, their order
    // stays the VM's, whose lookups take the first.
    const auto by_offset = [](const PcScope& a, const PcScope& b) { return a.pc_offset < b.pc_offset; };
    if (!std::is_sorted(code->load.scopes.begin(), code->load.scopes.end(), by_offset)) {
        std::stable_sort(code->load.scopes.begin(), code->load.scopes.end(), by_offset);
    }
    code->valid_from = code->load.time_ns;
    code->serial = ++load_serial_;
    derive_continuation_return(code->load);
    const uint64_t begin = code->load.code_begin;
    live_index_->insert(begin, code->load.code_end, code.get());
    live_.emplace(begin, std::move(code));
}

void CodeMap::apply_unload(const CodeUnload& unload) {
    auto it = live_.find(unload.code_begin);
    if (it != live_.end() && it->second->load.method_id == unload.method_id &&
        it->second->valid_from <= unload.time_ns) {
        auto code = it->second;
        note_code_range(code->load.code_begin, code->load.code_end);
        live_.erase(it);
        live_index_->erase(code->load.code_begin, code->load.code_end, code.get());
        retire(std::move(code), unload.time_ns);
        return;
    }
    // Already replaced by newer code: shorten the retired entry if the unload says it ended earlier.
    CompiledCode* latest = nullptr;
    for (auto& c : history_) {
        if (c->load.code_begin == unload.code_begin && c->load.method_id == unload.method_id &&
            c->valid_from <= unload.time_ns && (!latest || c->valid_from > latest->valid_from)) {
            latest = c.get();
        }
    }
    if (latest) {
        note_code_range(latest->load.code_begin, latest->load.code_end);
        latest->valid_until = std::min(latest->valid_until, unload.time_ns);
    }
}

void CodeMap::note_code_range(uint64_t begin, uint64_t end) {
    if (end <= begin) return;
    const KeyRange r{page_key(begin), page_key(end - 1)};
    if (applying_.lo > applying_.hi) {
        applying_ = r;
    } else {
        applying_.lo = std::min(applying_.lo, r.lo);
        applying_.hi = std::max(applying_.hi, r.hi);
    }
}

// After each applied event (epoch_ already bumped): what it changed, for changes_since().
void CodeMap::note_change() {
    constexpr size_t kMaxChanges = 4096;
    if (applying_everything_) {
        changes_.clear();
        changes_from_ = epoch_;
    } else {
        changes_.emplace_back(epoch_, applying_);
        if (changes_.size() > kMaxChanges) {
            changes_from_ = changes_.front().first;
            changes_.pop_front();
        }
    }
    applying_ = KeyRange{};
    applying_everything_ = false;
}

bool CodeMap::changes_since(uint64_t epoch, std::vector<KeyRange>& out) const {
    out.clear();
    if (epoch < changes_from_ || epoch > epoch_) return false;
    // changes_ is in epoch order: the ones after `epoch` are its tail.
    for (auto it = changes_.rbegin(); it != changes_.rend() && it->first > epoch; ++it) {
        if (it->second.lo <= it->second.hi) out.push_back(it->second);
    }
    return true;
}

void CodeMap::rebuild_history_reach(size_t from) {
    history_reach_.resize(history_.size());
    for (size_t i = from; i < history_.size(); ++i) {
        const uint64_t end = history_ranges_[i].end;
        history_reach_[i] = i == 0 ? end : std::max(history_reach_[i - 1], end);
    }
}

const CompiledCode* CodeMap::find_in_history(uint64_t pc, uint64_t time_ns, TimeSpan* span) const {
    const auto after = std::upper_bound(history_ranges_.begin(), history_ranges_.end(), pc,
                                        [](uint64_t p, const HistoryRange& r) { return p < r.begin; });
    const CompiledCode* next_loaded = nullptr;
    for (size_t i = static_cast<size_t>(after - history_ranges_.begin()); i-- > 0;) {
        if (history_reach_[i] <= pc) break;
        if (pc >= history_ranges_[i].end) continue;
        const CompiledCode& c = *history_[i];
        if (!c.contains(pc)) continue;
        if (span) {   // every code at pc bounds it, the one answered or not: it decides another time
            span->narrow(c.valid_from, time_ns);
            span->narrow(c.valid_until, time_ns);
        }
        if (c.valid_from <= time_ns && time_ns < c.valid_until) return &c;
        if (c.valid_from > time_ns &&
            (!next_loaded || c.valid_from < next_loaded->valid_from)) {
            next_loaded = &c;
        }
    }
    return next_loaded;
}

const CompiledCode* CodeMap::find_live(uint64_t pc) const {
    if (const auto indexed = live_index_->find(pc); indexed.known) return indexed.value;
    auto it = live_.upper_bound(pc);
    if (it == live_.begin()) return nullptr;
    const CompiledCode& c = *std::prev(it)->second;
    return c.contains(pc) ? &c : nullptr;
}

const CompiledCode* CodeMap::find_compiled(uint64_t pc, uint64_t time_ns) const {
    if (lookup_log_) lookup_log_->add(page_key(pc));
    return find_compiled_unlogged(pc, time_ns);
}

const CompiledCode* CodeMap::find_compiled_unlogged(uint64_t pc, uint64_t time_ns, TimeSpan* span) const {
    // A native pc (most of a JVM thread's frames, and every one its native steps ask about) lies
    // outside every range code was ever loaded at: no lookup needed.
    if (pc < loaded_lo_ || pc >= loaded_hi_) return nullptr;
    const CompiledCode* live = find_live(pc);
    if (live && span) span->narrow(live->valid_from, time_ns);
    if (live && live->valid_from <= time_ns) return live;
    if (history_.empty()) return live;
    // One pass finds the code valid at the sample's time, else the code announced next after it
    // (its load event lagged).
    const CompiledCode* next = find_in_history(pc, time_ns, span);
    if (next && next->valid_from <= time_ns && time_ns < next->valid_until) return next;
    if (live && (!next || live->valid_from < next->valid_from)) return live;
    return next;
}

void CodeMap::apply_stub(const Stub& stub) {
    if (stub.end <= stub.begin) return;
    if (detail::is_continuation_thaw(stub.name) && thaw_stub_ != stub.begin) {
        thaw_stub_ = stub.begin;
        for (const auto& [begin, code] : live_) derive_continuation_return(code->load);
    }
    note_code_range(stub.begin, stub.end);
    stubs_lo_ = std::min(stubs_lo_, stub.begin);
    stubs_hi_ = std::max(stubs_hi_, stub.end);
    for (size_t i = 0; i < stubs_.size(); ++i) {
        Stub& s = stubs_[i];
        if (s.begin == stub.begin && s.end == stub.end) {
            if (s.name != stub.name) stub_names_[i] = InternedName(stub.name);
            s = stub;   // re-announced (the start scan, DynamicCodeGenerated, each code poll): same segments
            stub_memos_[i] = 0;
            return;
        }
    }
    stubs_.push_back(stub);
    stub_memos_.push_back(0);
    stub_names_.emplace_back(stub.name);
    if (stubs_dirty_) return;
    // Stubs generated while the program runs (adapters, method handle stubs) mostly land where no
    // stub is yet: one more segment, instead of re-flattening all of them at the next lookup.
    auto after = std::upper_bound(stub_segments_.begin(), stub_segments_.end(), stub.begin,
                                  [](uint64_t b, const StubSegment& s) { return b < s.begin; });
    const bool overlaps_before = after != stub_segments_.begin() && std::prev(after)->end > stub.begin;
    const bool overlaps_after = after != stub_segments_.end() && after->begin < stub.end;
    if (overlaps_before || overlaps_after) {
        stubs_dirty_ = true;
        return;
    }
    stub_segments_.insert(after, StubSegment{stub.begin, stub.end, static_cast<uint32_t>(stubs_.size() - 1)});
}

// Stub ranges nest (a "StubRoutines" BufferBlob holds many named stubs), so they are flattened into
// non-overlapping segments where the smallest containing stub wins: paint the largest first.
void CodeMap::rebuild_stub_segments() const {
    stubs_dirty_ = false;
    std::vector<uint64_t> bounds;
    bounds.reserve(stubs_.size() * 2);
    for (const auto& s : stubs_) {
        bounds.push_back(s.begin);
        bounds.push_back(s.end);
    }
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    constexpr uint32_t kNone = UINT32_MAX;
    std::vector<uint32_t> owner(bounds.empty() ? 0 : bounds.size() - 1, kNone);
    std::vector<uint32_t> order(stubs_.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
        return stubs_[a].end - stubs_[a].begin > stubs_[b].end - stubs_[b].begin;
    });
    for (uint32_t idx : order) {
        auto first = std::lower_bound(bounds.begin(), bounds.end(), stubs_[idx].begin) - bounds.begin();
        auto last = std::lower_bound(bounds.begin(), bounds.end(), stubs_[idx].end) - bounds.begin();
        for (auto i = first; i < last; ++i) owner[static_cast<size_t>(i)] = idx;
    }
    stub_segments_.clear();
    for (size_t i = 0; i < owner.size(); ++i) {
        if (owner[i] == kNone) continue;
        if (!stub_segments_.empty() && stub_segments_.back().end == bounds[i] &&
            stub_segments_.back().stub_index == owner[i]) {
            stub_segments_.back().end = bounds[i + 1];
        } else {
            stub_segments_.push_back({bounds[i], bounds[i + 1], owner[i]});
        }
    }
}

const Stub* CodeMap::find_stub(uint64_t pc) const {
    if (pc < stubs_lo_ || pc >= stubs_hi_) return nullptr;
    if (stubs_dirty_) rebuild_stub_segments();
    auto it = std::upper_bound(stub_segments_.begin(), stub_segments_.end(), pc,
                               [](uint64_t p, const StubSegment& s) { return p < s.begin; });
    if (it == stub_segments_.begin()) return nullptr;
    --it;
    if (pc >= it->end) return nullptr;
    return &stubs_[it->stub_index];
}

CodeLookup CodeMap::find_code_uncached(uint64_t pc, uint64_t time_ns, TimeSpan* span_out) const {
    CodeLookup r;
    TimeSpan span;
    if (const CompiledCode* c = find_compiled_unlogged(pc, time_ns, &span)) {
        r.region = CodeRegion::kCompiled;
        r.compiled = c;
    } else if (const Stub* s = find_stub(pc)) {
        r.region = CodeRegion::kStub;
        r.stub = s;
    } else if (in_code_cache(pc)) {
        r.region = CodeRegion::kUnknownCodeCache;
    }
    code_cache_[code_cache_slot(pc)] = CodeCacheEntry{pc, code_generation_, span, r};
    if (span_out) *span_out = span;
    return r;
}

MethodInfo* CodeMap::store_method(MethodInfo&& method) const {
    if (method_chunks_.empty() || method_chunk_used_ == kMethodChunk) {
        method_chunks_.push_back(std::make_unique<MethodInfo[]>(kMethodChunk));
        method_chunk_used_ = 0;
    }
    MethodInfo& slot = method_chunks_.back()[method_chunk_used_++];
    slot = std::move(method);
    return &slot;
}

CodeMap::MethodRecord* CodeMap::store_record(uint64_t time_ns, const MethodEntry& method) {
    if (record_chunks_.empty() || record_chunk_used_ == kRecordChunk) {
        // Not value-initialised: each record is written whole below.
        record_chunks_.push_back(std::unique_ptr<MethodRecord[]>(new MethodRecord[kRecordChunk]));
        record_chunk_used_ = 0;
    }
    MethodRecord& record = record_chunks_.back()[record_chunk_used_++];
    record = MethodRecord{time_ns, method, nullptr};
    return &record;
}

const MethodInfo* CodeMap::info_of(const MethodRecord* record) const {
    if (record == nullptr) return nullptr;
    if (record->info == nullptr) {
        const MethodEntry& m = record->method;
        MethodInfo method;
        method.time_ns = record->time_ns;
        method.method_id = m.method_id;
        method.method_ptr = m.method_ptr;
        method.bytecode_begin = m.bytecode_begin;
        method.bytecode_size = m.bytecode_size;
        method.access_flags = m.access_flags;
        record->info = store_method(std::move(method));
    }
    return record->info;
}

namespace {
bool has_names(const MethodInfo& m) {
    return !m.name.empty() || !m.class_name.empty() || !m.signature.empty() || !m.source_file.empty() || !m.lines.empty();
}
}  // namespace

void CodeMap::apply_method(MethodInfo&& method) {
    MethodRecord* record = store_record(method.time_ns, MethodEntry{method.method_id, method.method_ptr,
                                                                    method.bytecode_begin, method.bytecode_size,
                                                                    method.access_flags});
    if (has_names(method)) record->info = store_method(std::move(method));
    apply_record(record);
}

void CodeMap::apply_record(MethodRecord* record) {
    if (record->method.method_id != 0) {
        const MethodRecord*& latest = methods_by_id_[record->method.method_id];
        // A jmethodID names one method for the JVM's life: an announcement without names (a
        // MethodBatch after a redefinition) keeps those the id already had.
        const MethodInfo* before = latest != nullptr ? latest->info : nullptr;
        if (record->info == nullptr && before != nullptr && !before->name.empty()) {
            MethodInfo* info = const_cast<MethodInfo*>(info_of(record));
            info->class_name = before->class_name;
            info->name = before->name;
            info->signature = before->signature;
            info->source_file = before->source_file;
            info->lines = before->lines;
        }
        latest = record;
    }
    const uint64_t ptr = record->method.method_ptr;
    if (ptr == 0) return;
    applying_ = KeyRange{method_key(ptr), method_key(ptr)};
    if (MethodCacheEntry& cached = method_cache_[method_slot(ptr)]; cached.ptr == ptr) {
        cached.valid = false;
    }
    const MethodVersion version = version_of(record);
    const auto earlier = [](uint64_t t, const MethodVersion& v) { return t < v.time_ns; };
    if (auto multi = versions_by_ptr_.find(ptr); multi != versions_by_ptr_.end()) {
        auto& versions = multi->second;
        versions.insert(std::upper_bound(versions.begin(), versions.end(), version.time_ns, earlier), version);
        return;
    }
    auto [single, inserted] = single_version_by_ptr_.try_emplace(ptr, record);
    if (inserted) return;
    // A second version of this Method*: both move to the multi-version map, oldest first (equal
    // times keep arrival order, as the later one was announced later). (A retired slot's Method* is
    // in that map, found above: forget_before moves it back before its versions drop below one.)
    std::vector<MethodVersion> versions{version_of(*single)};
    versions.insert(std::upper_bound(versions.begin(), versions.end(), version.time_ns, earlier), version);
    *single = nullptr;
    versions_by_ptr_.emplace(ptr, std::move(versions));
}

void CodeMap::apply_batch(const MethodBatch& batch) {
    // Each entry as the MethodInfo event it stands for, with its own epoch and change record, so
    // that incremental decoding sees exactly what a run of MethodInfo events would have shown it.
    // A class's methods land at random places in the maps: their cache misses, ~80 % of the time
    // an apply took, overlap when the lines of the next few are asked for ahead.
    constexpr size_t kAhead = 4;
    const auto prefetch = [this](const MethodEntry& entry) {
        methods_by_id_.prefetch(entry.method_id);
        single_version_by_ptr_.prefetch(entry.method_ptr);
        prefetch_line(&method_cache_[method_slot(entry.method_ptr)]);
    };
    for (size_t i = 0; i < std::min(kAhead, batch.methods.size()); ++i) prefetch(batch.methods[i]);
    for (size_t i = 0; i < batch.methods.size(); ++i) {
        if (i + kAhead < batch.methods.size()) prefetch(batch.methods[i + kAhead]);
        const MethodEntry& entry = batch.methods[i];
        apply_record(store_record(batch.time_ns, entry));
        ++epoch_;
        note_change();
    }
    if (!batch.methods.empty()) time_horizon_ = std::max(time_horizon_, batch.time_ns);
}

void CodeMap::apply_names(NamedMethod&& named) {
    // Names change no walk: no epoch, no change record. The latest announcement of the id is the
    // one method_by_id answers with; a redefinition keeps the names, so only that one is filled.
    const MethodRecord* const* found = methods_by_id_.find(named.method_id);
    const MethodRecord* record = found != nullptr ? *found : nullptr;
    if (record == nullptr) {
        // Named before announced (or never announced): kept for method_by_id alone.
        record = store_record(named.time_ns, MethodEntry{named.method_id, 0, 0, 0, 0});
        methods_by_id_[named.method_id] = record;
    }
    MethodInfo* info = const_cast<MethodInfo*>(info_of(record));
    // Unresolved: the frames keep their placeholder name.
    if (!info->name.empty() || !named.resolved) return;
    info->class_name = std::move(named.class_name);
    info->name = std::move(named.name);
    info->signature = std::move(named.signature);
    info->source_file = std::move(named.source_file);
    info->lines = std::move(named.lines);
}

const MethodInfo* CodeMap::method_by_id(uint64_t method_id) const {
    const MethodRecord* const* found = methods_by_id_.find(method_id);
    return found == nullptr ? nullptr : info_of(*found);
}

const MethodInfo* CodeMap::method_by_ptr(uint64_t method_ptr, uint64_t time_ns) const {
    if (lookup_log_) lookup_log_->add(method_key(method_ptr));
    MethodCacheEntry& cached = method_cache_[method_slot(method_ptr)];
    if (cached.ptr == method_ptr && cached.valid) return cached.info;
    if (const MethodRecord* const* single = single_version_by_ptr_.find(method_ptr); single && *single) {
        const MethodInfo* info = info_of(*single);
        cached = MethodCacheEntry{method_ptr, info, true};
        return info;
    }
    auto it = versions_by_ptr_.find(method_ptr);
    if (it == versions_by_ptr_.end() || it->second.empty()) {
        cached = MethodCacheEntry{method_ptr, nullptr, true};
        return nullptr;
    }
    const auto& versions = it->second;
    auto pos = std::upper_bound(versions.begin(), versions.end(), time_ns,
                                [](uint64_t t, const MethodVersion& v) { return t < v.time_ns; });
    if (pos == versions.begin()) return info_of(versions.front().record);
    return info_of(std::prev(pos)->record);
}

void CodeMap::apply_module(const ModuleMap& module) {
    if (module.end <= module.begin) return;
    auto overlaps = [&](const ModuleMap& m) { return m.begin < module.end && module.begin < m.end; };
    modules_.erase(std::remove_if(modules_.begin(), modules_.end(), overlaps), modules_.end());
    auto pos = std::upper_bound(modules_.begin(), modules_.end(), module.begin,
                                [](uint64_t b, const ModuleMap& m) { return b < m.begin; });
    modules_.insert(pos, module);
    ++modules_generation_;
}

const ModuleMap* CodeMap::module_at(uint64_t address) const {
    for (const ModuleAnswer* a : {&module_hit_, &module_miss_}) {
        if (a->generation == modules_generation_ && address >= a->lo && address < a->hi) return a->module;
    }
    auto it = std::upper_bound(modules_.begin(), modules_.end(), address,
                               [](uint64_t a, const ModuleMap& m) { return a < m.begin; });
    if (it != modules_.begin() && address < std::prev(it)->end) {
        const ModuleMap& m = *std::prev(it);
        module_hit_ = {m.begin, m.end, modules_generation_, &m};
        return &m;
    }
    // Between the module before (or the bottom) and the one after (or the top).
    module_miss_ = {it == modules_.begin() ? 0 : std::prev(it)->end, it == modules_.end() ? kForever : it->begin,
                    modules_generation_, nullptr};
    return nullptr;
}

const PcScope* CodeMap::scope_at(const CodeLoad& code, uint32_t pc_offset) {
    auto it = std::lower_bound(code.scopes.begin(), code.scopes.end(), pc_offset,
                               [](const PcScope& s, uint32_t off) { return s.pc_offset < off; });
    if (it == code.scopes.end() || it->pc_offset != pc_offset) return nullptr;
    return &*it;
}

const PcScope* CodeMap::scope_at_or_after(const CodeLoad& code, uint32_t pc_offset) {
    auto it = std::lower_bound(code.scopes.begin(), code.scopes.end(), pc_offset,
                               [](const PcScope& s, uint32_t off) { return s.pc_offset < off; });
    return it == code.scopes.end() ? nullptr : &*it;
}

void CodeMap::forget_before(uint64_t time_ns) {
    const size_t history_before = history_.size();
    bool versions_dropped = false;
    history_.erase(std::remove_if(history_.begin(), history_.end(),
                                  [&](const auto& c) { return c->valid_until <= time_ns; }),
                   history_.end());
    history_ranges_.clear();
    for (const auto& c : history_) history_ranges_.push_back(HistoryRange{c->load.code_begin, c->load.code_end});
    rebuild_history_reach(0);
    // MethodInfo objects stay in the store (jmethodID lookups keep them alive); only the Method*
    // versions that a sample at or after `time_ns` can no longer select are dropped.
    for (auto it = versions_by_ptr_.begin(); it != versions_by_ptr_.end();) {
        std::vector<MethodVersion>& versions = it->second;
        auto pos = std::upper_bound(versions.begin(), versions.end(), time_ns,
                                    [](uint64_t t, const MethodVersion& v) { return t < v.time_ns; });
        if (pos != versions.begin() && std::prev(pos) != versions.begin()) {
            versions.erase(versions.begin(), std::prev(pos));
            versions_dropped = true;
        }
        if (versions.size() == 1) {
            single_version_by_ptr_[it->first] = versions.front().record;
            it = versions_by_ptr_.erase(it);
        } else {
            ++it;
        }
    }
    if (history_.size() != history_before) ++code_generation_;   // find_code's answers may point into it
    if (versions_dropped || history_.size() != history_before) {
        ++epoch_;
        applying_everything_ = true;   // answers at times before time_ns changed, anywhere
        note_change();
    }
}

}  // namespace sf
