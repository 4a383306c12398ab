#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "stackfrag/kernel/perf_events.hpp"

namespace sf::kernel {

namespace {
// epoll data of the eventfd; ring registrations use their fd + 1, so never 0.
constexpr uint64_t kWakeToken = 0;
}  // namespace

// Rings are registered by fd (epoll data = fd + 1) and the fd maps to the caller's key here, so
// that a hung-up ring can be dropped from the epoll set by wait() itself.
//
// A ring without data reports sits in a second epoll set that nobody sleeps on (quiet_fd), which
// wait() looks at without waiting. In the set that is slept on, a perf fd registered for no event
// at all still woke the waiter at every watermark's worth written: perf wakes its wait queue
// without saying which event (EPOLLIN) it means, so epoll queues the fd and wakes the sleeper,
// which then finds nothing to report and sleeps again (ep_poll's loop, invisible to the caller).
// On httpserver at 1 kHz that was ~0.7 extra sleeps and wake-ups of the reader per cycle, each a
// context switch with cold caches. In the quiet set the same wake-up only queues the fd.
struct RingPoller::State {
    int epoll_fd = -1;
    int quiet_fd = -1;
    int wake_fd = -1;
    std::mutex mutex;
    struct Entry {
        uint64_t key = 0;
        bool on_data = true;   // in epoll_fd (else in quiet_fd)
    };
    std::unordered_map<int, Entry> entries;
    std::vector<epoll_event> events = std::vector<epoll_event>(64);

    int set_of(bool on_data) const { return on_data ? epoll_fd : quiet_fd; }

    ~State() {
        if (epoll_fd >= 0) close(epoll_fd);
        if (quiet_fd >= 0) close(quiet_fd);
        if (wake_fd >= 0) close(wake_fd);
    }
};

Result<RingPoller> RingPoller::create() {
    auto state = std::make_unique<State>();
    state->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (state->epoll_fd < 0) {
        return sys_error(errno == EMFILE ? Errc::kResourceLimit : Errc::kInternal, errno,
                         "epoll_create1 for the ring poller", "raise RLIMIT_NOFILE (ulimit -n)");
    }
    state->quiet_fd = epoll_create1(EPOLL_CLOEXEC);
    if (state->quiet_fd < 0) {
        return sys_error(errno == EMFILE ? Errc::kResourceLimit : Errc::kInternal, errno,
                         "epoll_create1 for the ring poller's quiet rings", "raise RLIMIT_NOFILE (ulimit -n)");
    }
    state->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (state->wake_fd < 0) {
        return sys_error(errno == EMFILE ? Errc::kResourceLimit : Errc::kInternal, errno,
                         "eventfd for the ring poller", "raise RLIMIT_NOFILE (ulimit -n)");
    }
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = kWakeToken;
    if (epoll_ctl(state->epoll_fd, EPOLL_CTL_ADD, state->wake_fd, &event) != 0) {
        return sys_error(Errc::kInternal, errno, "registering the ring poller's eventfd");
    }
    RingPoller poller;
    poller.state_ = std::move(state);
    return poller;
}

RingPoller::RingPoller(RingPoller&& other) noexcept = default;
RingPoller& RingPoller::operator=(RingPoller&& other) noexcept = default;
RingPoller::~RingPoller() = default;

Status RingPoller::add(int fd, uint64_t key, bool on_data) {
    std::lock_guard lock(state_->mutex);
    epoll_event event{};
    event.events = on_data ? uint32_t{EPOLLIN} : uint32_t{0};   // EPOLLHUP and EPOLLERR are reported either way
    event.data.u64 = static_cast<uint64_t>(fd) + 1;
    if (epoll_ctl(state_->set_of(on_data), EPOLL_CTL_ADD, fd, &event) != 0) {
        return sys_error(errno == ENOSPC || errno == ENOMEM ? Errc::kResourceLimit
                                                            : Errc::kInvalidArgument,
                         errno, "adding perf ring fd " + std::to_string(fd) + " to the poller",
                         errno == ENOSPC ? "raise fs.epoll.max_user_watches" : "");
    }
    state_->entries[fd] = State::Entry{key, on_data};
    return {};
}

Status RingPoller::set_on_data(int fd, bool on_data) {
    std::lock_guard lock(state_->mutex);
    const auto found = state_->entries.find(fd);
    if (found == state_->entries.end()) return {};   // dropped at its hang-up
    if (found->second.on_data == on_data) return {};
    epoll_event event{};
    event.events = on_data ? uint32_t{EPOLLIN} : uint32_t{0};
    event.data.u64 = static_cast<uint64_t>(fd) + 1;
    // Into the other set first: a hang-up in between is then reported by one set or the other.
    if (epoll_ctl(state_->set_of(on_data), EPOLL_CTL_ADD, fd, &event) != 0) {
        return sys_error(Errc::kInvalidArgument, errno, "moving perf ring fd " + std::to_string(fd) + " in the poller");
    }
    (void)epoll_ctl(state_->set_of(!on_data), EPOLL_CTL_DEL, fd, nullptr);
    found->second.on_data = on_data;
    return {};
}

Status RingPoller::remove(int fd) {
    std::lock_guard lock(state_->mutex);
    const auto found = state_->entries.find(fd);
    if (found == state_->entries.end()) {
        // Already dropped by wait() after a hang-up (or never added): nothing to undo.
        return {};
    }
    const int set = state_->set_of(found->second.on_data);
    state_->entries.erase(found);
    if (epoll_ctl(set, EPOLL_CTL_DEL, fd, nullptr) != 0 && errno != ENOENT &&
        errno != EBADF) {
        return sys_error(Errc::kInternal, errno,
                         "removing perf ring fd " + std::to_string(fd) + " from the poller");
    }
    return {};
}

Result<size_t> RingPoller::wait(int timeout_ms, std::vector<RingReady>& ready) {
    State& state = *state_;
    const int count = epoll_wait(state.epoll_fd, state.events.data(),
                                 static_cast<int>(state.events.size()), timeout_ms);
    if (count < 0) {
        if (errno == EINTR) return size_t{0};
        return sys_error(Errc::kInternal, errno, "epoll_wait of the ring poller");
    }
    size_t reported = collect(state.epoll_fd, count, ready);
    // The quiet rings' hang-ups, without waiting. Their wake-ups queued them here (in an epoll set
    // nobody sleeps on); epoll asks each queued one once (perf_poll) and keeps none that has
    // nothing to report, so this costs one system call plus a look per ring that wrote since.
    const int quiet = epoll_wait(state.quiet_fd, state.events.data(), static_cast<int>(state.events.size()), 0);
    if (quiet > 0) reported += collect(state.quiet_fd, quiet, ready);
    return reported;
}

size_t RingPoller::collect(int set, int count, std::vector<RingReady>& ready) {
    State& state = *state_;
    size_t reported = 0;
    std::lock_guard lock(state.mutex);
    for (int i = 0; i < count; ++i) {
        const epoll_event& event = state.events[static_cast<size_t>(i)];
        if (event.data.u64 == kWakeToken) {
            uint64_t ignored = 0;
            [[maybe_unused]] ssize_t n = read(state.wake_fd, &ignored, sizeof ignored);
            continue;
        }
        const int fd = static_cast<int>(event.data.u64 - 1);
        const auto found = state.entries.find(fd);
        if (found == state.entries.end()) continue;   // removed while we waited
        RingReady entry;
        entry.key = found->second.key;
        entry.hung_up = (event.events & (EPOLLHUP | EPOLLERR)) != 0;
        if (entry.hung_up) {
            epoll_ctl(set, EPOLL_CTL_DEL, fd, nullptr);
            state.entries.erase(found);
        }
        ready.push_back(entry);
        ++reported;
    }
    if (static_cast<size_t>(count) == state.events.size()) state.events.resize(state.events.size() * 2);
    return reported;
}

Result<size_t> RingPoller::wait(int timeout_ms, std::vector<uint64_t>& ready_keys) {
    std::vector<RingReady> ready;
    Result<size_t> count = wait(timeout_ms, ready);
    if (!count) return count;
    for (const RingReady& entry : ready) ready_keys.push_back(entry.key);
    return count;
}

Status RingPoller::wake() {
    const uint64_t one = 1;
    if (write(state_->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN) {
        return sys_error(Errc::kInternal, errno, "waking the ring poller");
    }
    return {};
}

}  // namespace sf::kernel
