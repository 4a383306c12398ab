// Sampler::set_module_tracker: a library loaded after sampling started, in which a thread spins at
// once, is announced by the reader as soon as it meets the first sample there, and its ModuleMap
// comes before every sample that ran in it in the stream (the code poll would have announced it
// 5 s or more later, after them).
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "module_tracker.hpp"
#include "stackfrag/base/elf_file.hpp"
#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/base/clock.hpp"
#include "sampler.hpp"
#include "test_recording.hpp"
#include "stackfrag/events/recording.hpp"

using namespace sf;
using namespace sf::agent;

namespace {

bool ends_with(const std::string& text, const std::string& tail) {
    return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

TEST_CASE("a library loaded while sampling is announced before its first samples") {
    const std::string path = "/tmp/sf-agent-sampler-module-" + std::to_string(getpid()) + ".sfr";
    EventQueue queue;
    StreamWriter writer(test::new_recording(path));
    kernel::SamplingConfig config;
    config.period_ns = 1'000'000;
    Sampler sampler(config, queue, writer, nullptr);
    ModuleTracker modules;
    REQUIRE(modules.refresh(monotonic_ns(), queue) > 0);   // as go_live does, before the reader starts
    sampler.set_module_tracker(&modules);
    REQUIRE(sampler.start().ok());

    const std::string library = SF_LATE_LIBRARY;
    const std::string name = library.substr(library.rfind('/'));
    std::atomic<bool> added{false};
    std::atomic<bool> loaded{false};
    std::thread spinner([&] {
        added = sampler.add_thread(static_cast<pid_t>(syscall(SYS_gettid))).ok();
        // Samples in this binary first: known code, no rescan.
        const uint64_t end = thread_cpu_ns() + 50'000'000;
        volatile uint64_t x = 1;
        while (thread_cpu_ns() < end) x = x * 6364136223846793005ULL + 1;
        void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
        auto* spin = handle ? reinterpret_cast<uint64_t (*)(uint32_t)>(dlsym(handle, "sf_late_spin")) : nullptr;
        if (spin == nullptr) return;
        loaded = true;
        (void)spin(300);
    });
    spinner.join();
    REQUIRE(added);
    REQUIRE(loaded);
    REQUIRE(sampler.stop(3000));

    Result<std::unique_ptr<RecordingReader>> reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    std::optional<ModuleMap> announced;
    size_t samples_before = 0;   // samples in the library before its ModuleMap in the stream
    size_t samples_after = 0;
    uint64_t first_sample_ns = 0;
    std::vector<Sample> all;
    // The decoder's view, event by event in stream order: the module it finds at each sample's ip,
    // and the function the file names there (its code segment's vaddr = file offset, as for any
    // shared object the linker lays out by default).
    CodeMap map;
    ElfFile elf(library);
    size_t named = 0;
    while (std::optional<Event> event = (*reader)->next()) {
        if (const auto* module = std::get_if<ModuleMap>(&*event)) {
            if (ends_with(module->path, name) && !announced) announced = *module;
        } else if (const auto* sample = std::get_if<Sample>(&*event)) {
            all.push_back(*sample);
            if (announced && sample->regs.ip >= announced->begin && sample->regs.ip < announced->end) {
                ++samples_after;
                if (first_sample_ns == 0) first_sample_ns = sample->time_ns;
                const ModuleMap* found = map.module_at(sample->regs.ip);
                if (found != nullptr && ends_with(found->path, name)) {
                    const auto function = elf.function_at(sample->regs.ip - found->begin + found->file_offset);
                    if (function && function->name == "sf_late_spin") ++named;
                }
            }
            continue;
        }
        map.apply(std::move(*event));
    }
    REQUIRE(announced.has_value());
    // Samples that ran in the library before its ModuleMap in the stream (none may).
    for (const Sample& sample : all) {
        if (sample.time_ns < announced->time_ns && sample.regs.ip >= announced->begin && sample.regs.ip < announced->end) {
            ++samples_before;
        }
    }
    CHECK(samples_before == 0);
    CHECK(samples_after >= 100);   // 300 ms of CPU at 1 kHz, less on a loaded machine
    CHECK(announced->time_ns <= first_sample_ns);
    // The spin loop is sf_late_spin's own code; its clock reads go to the vDSO, outside the library.
    CHECK(named == samples_after);
    const SamplerStats stats = sampler.stats();
    CHECK(stats.modules_found >= 1);
    // The rescan is for unknown code only: this binary's and libc's samples cause none.
    CHECK(stats.module_rescans >= 1);
    CHECK(stats.module_rescans <= 3);
    std::remove(path.c_str());
}
