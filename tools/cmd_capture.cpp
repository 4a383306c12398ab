// `stackfrag capture [options] -- PROGRAM [ARGS...]`: runs a program under per-thread (or per-CPU)
// perf sampling, prints what arrived, and optionally records the samples for the decoder.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fmt/core.h>

#include "commands.hpp"
#include "stackfrag/base/clock.hpp"
#include "stackfrag/base/elf_file.hpp"
#include "stackfrag/events/events.hpp"
#include "stackfrag/events/recording.hpp"
#include "stackfrag/kernel/perf_events.hpp"
#include "stackfrag/kernel/proc_maps.hpp"

namespace sf::cli {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kThreadScanInterval = std::chrono::milliseconds(20);
constexpr auto kNameAndMapRefresh = std::chrono::milliseconds(500);
constexpr auto kTermGrace = std::chrono::seconds(1);
constexpr size_t kTopIps = 5;

volatile sig_atomic_t g_interrupted = 0;

void on_interrupt(int) { g_interrupted = 1; }

std::string read_first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

struct CaptureOptions {
    std::string interval = "1ms";
    std::string duration = "2s";
    uint32_t stack_bytes = 16384;
    std::string clock = "task";
    uint32_t ring_pages = 0;
    bool per_cpu = false;
    std::string output;
    std::vector<std::string> command;
};

using Mapping = kernel::ExecutableMapping;
using kernel::own_vdso_image;
using kernel::read_executable_maps;

// Function symbols of one ELF file by file offset. Good enough to name the hot spots.
class ElfSymbols {
public:
    static std::unique_ptr<ElfSymbols> load(const std::string& path) {
        auto symbols = std::make_unique<ElfSymbols>();
        symbols->elf_ = ElfFile(path);
        return symbols->elf_.valid() ? std::move(symbols) : nullptr;
    }

    // "name+0xoff", or "" when no symbol covers the address.
    std::string name_of(uint64_t file_offset) {
        const std::optional<uint64_t> vaddr = elf_.vaddr_at_offset(file_offset);
        if (!vaddr) return "";
        const std::optional<ElfFile::Function> function = elf_.function_at(*vaddr);
        if (!function) return "";
        return fmt::format("{}+{:#x}", function->name, *vaddr - function->vaddr);
    }

private:
    ElfFile elf_;
};

class Symbolizer {
public:
    void set_maps(std::vector<Mapping> maps) { maps_ = std::move(maps); }

    std::string describe(uint64_t ip) {
        auto after = std::upper_bound(maps_.begin(), maps_.end(), ip,
                                      [](uint64_t a, const Mapping& m) { return a < m.begin; });
        if (after == maps_.begin() || ip >= (after - 1)->end) return "?";
        const Mapping& mapping = *(after - 1);
        const std::string file = mapping.path.substr(mapping.path.rfind('/') + 1);
        if (mapping.path.empty() || mapping.path[0] != '/') return "? (" + (file.empty() ? std::string("anonymous") : file) + ")";
        auto cached = files_.find(mapping.path);
        if (cached == files_.end()) cached = files_.emplace(mapping.path, ElfSymbols::load(mapping.path)).first;
        const std::string name = cached->second ? cached->second->name_of(ip - mapping.begin + mapping.offset) : "";
        return (name.empty() ? "?" : name) + " (" + file + ")";
    }

private:
    std::vector<Mapping> maps_;
    std::map<std::string, std::unique_ptr<ElfSymbols>> files_;
};

struct ThreadSummary {
    std::string name;
    uint64_t samples = 0;
    uint64_t lost = 0;
    uint64_t fragment_bytes = 0;
    bool sampled_by_own_event = false;
    bool ended = false;
};

// Receives every record of every ring: counts per thread and IP, and writes the recording.
class CaptureSink : public kernel::RingHandler {
public:
    explicit CaptureSink(RecordingWriter* writer) : writer_(writer) {}

    void on_sample(const kernel::SampleView& view) override {
        ThreadSummary& thread = threads[static_cast<pid_t>(view.tid)];
        ++thread.samples;
        thread.fragment_bytes += view.stack_size;
        ++ip_counts[view.has_regs ? view.regs.ip : view.ip];
        if (writer_ == nullptr) return;
        Sample sample;
        sample.time_ns = view.time_ns;
        sample.pid = view.pid;
        sample.tid = view.tid;
        sample.source = SampleSource::kPerf;
        sample.regs = view.regs;
        sample.stack_sp = view.regs.sp;
        sample.stack.assign(view.stack, view.stack + view.stack_size);
        write(sample);
    }

    void on_lost(const kernel::LostView& lost) override {
        threads[static_cast<pid_t>(lost.tid)].lost += lost.count;
        write(Lost{lost.time_ns, lost.tid, lost.count});
    }

    void on_throttle(const kernel::ThrottleView& throttle) override {
        if (throttle.throttled) ++throttles;
    }

    void write(const Event& event) {
        if (writer_ == nullptr || !write_error.empty()) return;
        if (Status status = writer_->write(event); !status) write_error = status.error().describe();
    }

    std::map<pid_t, ThreadSummary> threads;
    std::unordered_map<uint64_t, uint64_t> ip_counts;
    uint64_t throttles = 0;
    std::string write_error;

private:
    RecordingWriter* writer_;
};

class Capture {
public:
    explicit Capture(const CaptureOptions& options) : options_(options) {}

    int run() {
        if (!configure()) return 2;
        auto poller = kernel::RingPoller::create();
        if (!poller) {
            fmt::print(stderr, "stackfrag capture: {}\n", poller.error().describe());
            return 1;
        }
        poller_.emplace(std::move(poller).value());
        if (!fork_held()) return 1;

        std::unique_ptr<RecordingWriter> writer;
        if (!options_.output.empty()) {
            RecordingHeader header;
            header.pid = static_cast<uint32_t>(child_);
            header.created_unix_ns = realtime_ns();
            header.created_monotonic_ns = monotonic_ns();
            header.producer = "stackfrag capture";
            for (const auto& arg : options_.command) header.command_line += (header.command_line.empty() ? "" : " ") + arg;
            auto created = RecordingWriter::create(options_.output, header);
            if (!created) {
                fmt::print(stderr, "stackfrag capture: {}\n", created.error().describe());
                abandon_child();
                return 1;
            }
            writer = std::move(created).value();
        }
        sink_ = std::make_unique<CaptureSink>(writer.get());
        if (!open_first_events()) {
            abandon_child();
            return 1;
        }
        if (int failed = release_child(); failed != 0) return failed;
        struct sigaction action{};
        action.sa_handler = on_interrupt;
        sigaction(SIGINT, &action, nullptr);
        const kernel::ReaderPriority priority = kernel::raise_reader_priority();

        const auto started = Clock::now();
        sample_until(started + std::chrono::nanoseconds(duration_ns_));
        const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
        for (auto& [key, tracked] : events_) (void)tracked.event.disable();
        for (auto& [key, tracked] : events_) tracked.event.ring().drain(*sink_);
        if (!child_exited_) refresh_names_and_maps();
        stop_child();
        signal(SIGINT, SIG_DFL);

        int exit_code = 0;
        if (writer) {
            if (sink_->write_error.empty()) {
                if (Status closed = writer->close(); !closed) sink_->write_error = closed.error().describe();
            }
            if (!sink_->write_error.empty()) {
                fmt::print(stderr, "stackfrag capture: writing {}: {}\n", options_.output, sink_->write_error);
                exit_code = 1;
            }
        }
        print_summary(seconds, priority, writer.get());
        return exit_code;
    }

private:
    struct TrackedEvent {
        kernel::PerfEvent event;
        pid_t tid;
    };

    bool configure() {
        auto period = kernel::parse_interval(options_.interval);
        auto duration = kernel::parse_interval(options_.duration);
        for (auto* parsed : {&period, &duration}) {
            if (!*parsed) {
                fmt::print(stderr, "stackfrag capture: {}\n", parsed->error().describe());
                return false;
            }
        }
        config_.period_ns = *period;
        duration_ns_ = *duration;
        config_.stack_bytes = options_.stack_bytes;
        if (options_.ring_pages != 0) config_.ring_pages = options_.ring_pages;
        config_.clock = options_.clock == "cpu" ? kernel::ClockKind::kCpu : kernel::ClockKind::kTask;
        if (Status valid = kernel::validate(config_); !valid) {
            fmt::print(stderr, "stackfrag capture: {}\n", valid.error().describe());
            return false;
        }
        return true;
    }

    // Forks the program held at a pipe until its first events are open and enabled; a second,
    // close-on-exec pipe carries exec's errno back if exec fails.
    bool fork_held() {
        int go[2];
        int exec_status[2];
        if (pipe2(go, O_CLOEXEC) != 0) {
            fmt::print(stderr, "stackfrag capture: pipe: {}\n", std::strerror(errno));
            return false;
        }
        if (pipe2(exec_status, O_CLOEXEC) != 0) {
            fmt::print(stderr, "stackfrag capture: pipe: {}\n", std::strerror(errno));
            close(go[0]);
            close(go[1]);
            return false;
        }
        std::vector<char*> argv;
        for (auto& arg : options_.command) argv.push_back(arg.data());
        argv.push_back(nullptr);
        child_ = fork();
        if (child_ < 0) {
            fmt::print(stderr, "stackfrag capture: fork: {}\n", std::strerror(errno));
            return false;
        }
        if (child_ == 0) {
            close(go[1]);
            close(exec_status[0]);
            char byte = 0;
            if (read(go[0], &byte, 1) != 1) _exit(127);   // the parent gave up
            execvp(argv[0], argv.data());
            const int err = errno;
            [[maybe_unused]] ssize_t n = write(exec_status[1], &err, sizeof err);
            _exit(127);
        }
        close(go[0]);
        close(exec_status[1]);
        go_fd_ = go[1];
        exec_status_fd_ = exec_status[0];
        return true;
    }

    // The held child has not run the program yet: closing the pipe makes it exit.
    void abandon_child() {
        close(go_fd_);
        close(exec_status_fd_);
        waitpid(child_, nullptr, 0);
    }

    // The program's main thread exists already (the held child); per-CPU events opened on it
    // are inherited by every thread it creates.
    bool open_first_events() {
        if (!options_.per_cpu) {
            known_threads_.insert(child_);
            if (!open_event(kernel::PerfEvent::open_thread(child_, config_), child_, true)) return false;
            sink_->threads[child_].sampled_by_own_event = true;
            return true;
        }
        // The child inherited this process's affinity: its threads run on these CPUs only.
        auto cpus = kernel::cpus_allowed();
        if (!cpus) {
            fmt::print(stderr, "stackfrag capture: {}\n", cpus.error().describe());
            return false;
        }
        for (int cpu : *cpus) {
            if (!open_event(kernel::PerfEvent::open_cpu(child_, cpu, config_), child_, true)) return false;
        }
        return true;
    }

    int release_child() {
        [[maybe_unused]] ssize_t n = write(go_fd_, "g", 1);
        close(go_fd_);
        int exec_errno = 0;
        const bool exec_failed = read(exec_status_fd_, &exec_errno, sizeof exec_errno) == sizeof exec_errno;
        close(exec_status_fd_);
        if (exec_failed) {
            fmt::print(stderr, "stackfrag capture: cannot run '{}': {}\n", options_.command[0], std::strerror(exec_errno));
            waitpid(child_, nullptr, 0);
            return 127;
        }
        return 0;
    }

    // Opens, registers and enables one event; reports the first failure of each kind only.
    bool open_event(Result<kernel::PerfEvent> opened, pid_t tid, bool required) {
        if (!opened) {
            const Error& error = opened.error();
            if (error.sys_errno == ESRCH && !required) return false;   // the thread already left
            if (required || reported_errors_.insert(static_cast<int>(error.code)).second) {
                fmt::print(stderr, "stackfrag capture: {}\n", error.describe());
            }
            return false;
        }
        const uint64_t key = next_key_++;
        auto [it, inserted] = events_.emplace(key, TrackedEvent{std::move(opened).value(), tid});
        Status added = poller_->add(it->second.event.fd(), key);
        Status enabled = added ? it->second.event.enable() : std::move(added);
        if (!enabled) {
            fmt::print(stderr, "stackfrag capture: {}\n", enabled.error().describe());
            events_.erase(it);
            return false;
        }
        return true;
    }

    void sample_until(Clock::time_point deadline) {
        std::vector<kernel::RingReady> ready;
        auto next_scan = Clock::now();
        auto next_refresh = Clock::now();
        while (!g_interrupted && !child_exited_) {
            const auto now = Clock::now();
            if (now >= deadline) break;
            if (now >= next_scan) {
                scan_threads();
                next_scan = now + kThreadScanInterval;
            }
            if (now >= next_refresh) {
                refresh_names_and_maps();
                next_refresh = now + kNameAndMapRefresh;
            }
            const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::min({deadline, next_scan, next_refresh}) - now);
            ready.clear();
            auto count = poller_->wait(static_cast<int>(std::max<int64_t>(wait_ms.count(), 1)), ready);
            if (!count) {
                fmt::print(stderr, "stackfrag capture: {}\n", count.error().describe());
                break;
            }
            for (const kernel::RingReady& entry : ready) {
                auto found = events_.find(entry.key);
                if (found == events_.end()) continue;
                found->second.event.ring().drain(*sink_);
                if (entry.hung_up) retire(found);
            }
            int status = 0;
            if (waitpid(child_, &status, WNOHANG) == child_) {
                child_exited_ = true;
                child_status_ = status;
            }
        }
    }

    void retire(std::map<uint64_t, TrackedEvent>::iterator found) {
        const pid_t tid = found->second.tid;
        finished_stats_.push_back(found->second.event.ring().stats());
        if (!options_.per_cpu) {
            ThreadSummary& thread = sink_->threads[tid];
            thread.ended = true;
            sink_->write(ThreadInfo{monotonic_ns(), static_cast<uint32_t>(tid), true, thread.name});
        }
        (void)poller_->remove(found->second.event.fd());
        events_.erase(found);
    }

    void scan_threads() {
        const std::string dir_path = "/proc/" + std::to_string(child_) + "/task";
        DIR* dir = opendir(dir_path.c_str());
        if (dir == nullptr) return;
        std::vector<pid_t> fresh;
        while (const dirent* entry = readdir(dir)) {
            char* end = nullptr;
            const long tid = std::strtol(entry->d_name, &end, 10);
            if (end == entry->d_name || *end != '\0') continue;
            if (known_threads_.insert(static_cast<pid_t>(tid)).second) fresh.push_back(static_cast<pid_t>(tid));
        }
        closedir(dir);
        for (pid_t tid : fresh) {
            note_name(tid);
            if (options_.per_cpu || tid == child_) continue;
            if (open_event(kernel::PerfEvent::open_thread(tid, config_), tid, false)) {
                sink_->threads[tid].sampled_by_own_event = true;
            }
        }
    }

    // Threads often name themselves just after they start, so names are read again later.
    void note_name(pid_t tid) {
        const std::string name = read_first_line("/proc/" + std::to_string(child_) + "/task/" + std::to_string(tid) + "/comm");
        if (name.empty()) return;
        ThreadSummary& thread = sink_->threads[tid];
        if (thread.name == name) return;
        thread.name = name;
        sink_->write(ThreadInfo{monotonic_ns(), static_cast<uint32_t>(tid), false, name});
    }

    void refresh_names_and_maps() {
        for (pid_t tid : known_threads_) {
            if (!sink_->threads[tid].ended) note_name(tid);
        }
        std::vector<Mapping> maps = read_executable_maps(child_);
        if (maps.empty()) return;
        for (const Mapping& mapping : maps) {
            if (!announced_maps_.insert({mapping.begin, mapping.end, mapping.path}).second) continue;
            if (mapping.path == "[vdso]") {
                // The child's vDSO is this kernel's, as ours is: our copy, where the sizes agree.
                if (!vdso_read_) {
                    vdso_ = own_vdso_image();
                    vdso_read_ = true;
                }
                if (vdso_.empty() || vdso_.size() != mapping.end - mapping.begin) continue;
                ModuleMap vdso{monotonic_ns(), mapping.begin, mapping.end, mapping.offset, mapping.path, {}, vdso_};
                vdso.build_id = ElfFile(vdso.image).build_id();
                sink_->write(vdso);
                continue;
            }
            sink_->write(ModuleMap{monotonic_ns(), mapping.begin, mapping.end, mapping.offset, mapping.path,
                                   ElfFile(mapping.path).build_id(), {}});
        }
        symbolizer_.set_maps(std::move(maps));
    }

    void stop_child() {
        if (child_exited_) return;
        kill(child_, SIGTERM);
        const auto give_up = Clock::now() + kTermGrace;
        while (Clock::now() < give_up) {
            if (waitpid(child_, &child_status_, WNOHANG) == child_) {
                child_exited_ = true;
                return;
            }
            usleep(10'000);
        }
        kill(child_, SIGKILL);
        waitpid(child_, &child_status_, 0);
        child_exited_ = true;
        killed_ = true;
    }

    void print_summary(double seconds, kernel::ReaderPriority priority, const RecordingWriter* writer) {
        kernel::RingStats total;
        std::vector<kernel::RingStats> all = finished_stats_;
        for (const auto& [key, tracked] : events_) all.push_back(tracked.event.ring().stats());
        for (const auto& stats : all) {
            total.samples += stats.samples;
            total.lost_samples += stats.lost_samples;
            total.throttle += stats.throttle;
            total.malformed += stats.malformed;
            total.stack_bytes += stats.stack_bytes;
            total.bytes += stats.bytes;
        }
        fmt::print("captured {:.2f} s of pid {} ({}) every {} ns ({}-clock, {}), reader {}\n", seconds, child_,
                   options_.command[0], config_.period_ns, config_.clock == kernel::ClockKind::kTask ? "task" : "cpu",
                   options_.per_cpu ? "per-CPU events" : "per-thread events", kernel::reader_priority_name(priority));
        if (WIFEXITED(child_status_) && !killed_) {
            fmt::print("program exited with status {}{}\n", WEXITSTATUS(child_status_),
                       g_interrupted ? " (interrupted)" : "");
        } else if (WIFSIGNALED(child_status_)) {
            fmt::print("program ended by signal {}{}\n", WTERMSIG(child_status_), killed_ ? " (SIGKILL after SIGTERM was ignored)" : "");
        }
        fmt::print("samples {}  lost {}  throttled {}  malformed {}  mean fragment {} bytes  ring data {:.1f} MB\n",
                   total.samples, total.lost_samples, total.throttle, total.malformed,
                   total.samples == 0 ? 0 : total.stack_bytes / total.samples, static_cast<double>(total.bytes) / 1e6);
        fmt::print("\n{:>8}  {:<16} {:>8} {:>6} {:>14}\n", "tid", "thread", "samples", "lost", "mean fragment");
        for (const auto& [tid, thread] : sink_->threads) {
            if (tid == 0 && thread.samples == 0 && thread.lost == 0) continue;
            fmt::print("{:>8}  {:<16} {:>8} {:>6} {:>14}{}\n", tid, thread.name.empty() ? "?" : thread.name,
                       thread.samples, thread.lost, thread.samples == 0 ? 0 : thread.fragment_bytes / thread.samples,
                       thread.ended ? "  (exited)" : "");
        }
        std::vector<std::pair<uint64_t, uint64_t>> top(sink_->ip_counts.begin(), sink_->ip_counts.end());
        std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
        if (top.size() > kTopIps) top.resize(kTopIps);
        if (!top.empty()) fmt::print("\ntop IPs\n");
        for (const auto& [ip, count] : top) {
            fmt::print("{:>8} {:5.1f}%  {:#014x}  {}\n", count,
                       100.0 * static_cast<double>(count) / static_cast<double>(std::max<uint64_t>(total.samples, 1)), ip,
                       symbolizer_.describe(ip));
        }
        if (writer != nullptr) {
            fmt::print("\nwrote {} events ({:.1f} MB) to {}\n", writer->events_written(),
                       static_cast<double>(writer->bytes_written()) / 1e6, options_.output);
        }
    }

    CaptureOptions options_;
    kernel::SamplingConfig config_;
    uint64_t duration_ns_ = 0;
    std::unique_ptr<CaptureSink> sink_;
    std::optional<kernel::RingPoller> poller_;
    std::map<uint64_t, TrackedEvent> events_;
    std::vector<kernel::RingStats> finished_stats_;
    uint64_t next_key_ = 1;
    std::set<pid_t> known_threads_;
    std::set<std::tuple<uint64_t, uint64_t, std::string>> announced_maps_;
    std::vector<uint8_t> vdso_;   // own_vdso_image(), read at the first [vdso] mapping
    bool vdso_read_ = false;
    std::set<int> reported_errors_;
    Symbolizer symbolizer_;
    pid_t child_ = -1;
    int go_fd_ = -1;
    int exec_status_fd_ = -1;
    bool child_exited_ = false;
    bool killed_ = false;
    int child_status_ = 0;
};

}  // namespace

void add_capture(CLI::App& app, int& exit_code) {
    auto options = std::make_shared<CaptureOptions>();
    auto* cmd = app.add_subcommand("capture", "Run a program under perf stack sampling and summarise (or record) the samples");
    cmd->add_option("--interval", options->interval, "sampling interval of each thread's CPU time (100us, 1ms, ...)")
        ->capture_default_str();
    cmd->add_option("--duration", options->duration, "how long to sample before stopping the program")->capture_default_str();
    cmd->add_option("--stack", options->stack_bytes, "bytes of user stack copied per sample (multiple of 8, up to 65528)")
        ->capture_default_str();
    cmd->add_option("--clock", options->clock, "task: the thread's CPU time; cpu: the CPU clock while it runs")
        ->check(CLI::IsMember({"task", "cpu"}))
        ->capture_default_str();
    cmd->add_option("--ring-pages", options->ring_pages, "data pages per ring, a power of two (default 128)");
    cmd->add_flag("--per-cpu", options->per_cpu,
                  "one inherited event per CPU the program may run on (this process's affinity, which it inherits) instead of one per thread (covers threads the program creates)");
    cmd->add_option("-o,--output", options->output, "write the samples and thread names to this recording");
    cmd->add_option("command", options->command, "the program and its arguments (after --)")->required();
    cmd->callback([options, &exit_code] { exit_code = Capture(*options).run(); });
}

}  // namespace sf::cli
