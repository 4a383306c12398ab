// Threads of the test binary that burn CPU until told to stop and report their tid and CPU time.
#pragma once

#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "stackfrag/base/clock.hpp"

namespace sf::test {

using sf::thread_cpu_ns;

class SpinningThread {
public:
    // `on_start` runs first on the new thread (e.g. to register it the way ThreadStart would).
    explicit SpinningThread(std::function<void()> on_start = {})
        : thread_([this, on_start] {
              tid_.store(static_cast<pid_t>(syscall(SYS_gettid)));
              if (on_start) on_start();
              const uint64_t begin = thread_cpu_ns();
              running_.store(true, std::memory_order_release);
              volatile uint64_t x = 1;
              while (!stop_.load(std::memory_order_relaxed)) x = x * 6364136223846793005ULL + 1;
              cpu_ns_.store(thread_cpu_ns() - begin);
          }) {
        while (!running_.load(std::memory_order_acquire)) std::this_thread::yield();
    }
    ~SpinningThread() { stop(); }

    pid_t tid() const { return tid_.load(); }
    // CPU time used by the thread so far.
    uint64_t cpu_so_far() {
        clockid_t clock{};
        if (pthread_getcpuclockid(thread_.native_handle(), &clock) != 0) return 0;
        return clock_ns(clock);
    }
    // Waits until the thread has used `ms` of CPU (at most 20 s: the machine may be shared).
    void wait_for_cpu_ms(uint64_t ms) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (cpu_so_far() < ms * 1'000'000u && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    // Stops and joins; returns the CPU time spent spinning.
    uint64_t stop() {
        stop_.store(true);
        if (thread_.joinable()) thread_.join();
        return cpu_ns_.load();
    }

private:
    std::atomic<pid_t> tid_{0};
    std::atomic<bool> running_{false};
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> cpu_ns_{0};
    std::thread thread_;
};

// A thread that spins `depth_kb` KB deep in its stack (1 KB frames), after running `at_bottom` there
// (e.g. to register it from the thread itself).
class DeepSpinningThread {
public:
    DeepSpinningThread(int depth_kb, std::function<void()> at_bottom)
        : at_bottom_(std::move(at_bottom)), thread_([this, depth_kb] { descend(depth_kb); }) {
        while (!running_.load(std::memory_order_acquire)) std::this_thread::yield();
    }
    ~DeepSpinningThread() { stop(); }
    pid_t tid() const { return tid_.load(); }
    void stop() {
        stop_.store(true);
        if (thread_.joinable()) thread_.join();
    }
    // Waits until the thread has used `ms` more CPU (at most 20 s: the machine may be shared).
    void wait_for_cpu_ms(uint64_t ms) {
        const uint64_t until = cpu_ns() + ms * 1'000'000u;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (cpu_ns() < until && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    uint64_t cpu_ns() {
        clockid_t clock{};
        if (pthread_getcpuclockid(thread_.native_handle(), &clock) != 0) return 0;
        return clock_ns(clock);
    }

private:
    __attribute__((noinline)) void descend(int depth) {
        volatile char pad[1024];
        pad[0] = static_cast<char>(depth);
        if (depth > 0) {
            descend(depth - 1);
        } else {
            tid_.store(static_cast<pid_t>(syscall(SYS_gettid)));
            if (at_bottom_) at_bottom_();
            running_.store(true, std::memory_order_release);
            volatile uint64_t x = 1;
            while (!stop_.load(std::memory_order_relaxed)) x = x * 6364136223846793005ULL + 1;
        }
        pad[1] = pad[0];
    }

    std::function<void()> at_bottom_;
    std::atomic<pid_t> tid_{0};
    std::atomic<bool> running_{false};
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace sf::test
