// push=URL: sends each period's profile (gzip'd pprof) to a Pyroscope-compatible /ingest endpoint
// from a thread of its own, through a bounded queue, retrying 429/5xx and connection errors with
// backoff; whoever offers a profile never waits for the network. docs/usage.md, "push".
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

#include "stackfrag/base/result.hpp"
#include "stackfrag/profile/cct.hpp"

namespace sf::agent {

// A push= URL taken apart: http or https, a host, a port, and the path of the ingest endpoint.
struct PushUrl {
    std::string scheme;   // "http" or "https"
    std::string host;     // a name, an IPv4 address or "[v6]"
    uint16_t port = 0;    // 80 / 443 when the URL has none
    std::string path;     // ends in "/ingest": added to a base URL that does not already end so
    // scheme://host:port/path, what the requests go to (no query).
    std::string endpoint() const;
};

// Accepts http://HOST[:PORT][/PATH] and https://...; "/ingest" is appended to PATH unless it ends
// with it already. The error says what is wrong (no message prefix: the caller names the option).
Result<PushUrl> parse_push_url(std::string_view text);

// The application name Pyroscope files the profiles under: letters, digits and . _ - (push_name=).
bool valid_push_app_name(std::string_view name);
// push_labels=key=value;key=value (';' since a comma ends the agent option): Pyroscope's
// "{key=value,key=value}", or an error naming the bad label. Keys: [A-Za-z_][A-Za-z0-9_.]*;
// values: no { } , = ; and not empty.
Result<std::string> push_labels_text(std::string_view labels);
// A default application name from the JVM's sun.java.command ("pkg.Main args", "dir/app.jar
// args", "module/pkg.Main"): the main class's simple name, or the jar's name without ".jar";
// characters outside valid_push_app_name become '_'. "java" when nothing is left.
std::string push_app_name_from_command(std::string_view java_command);

struct PushSettings {
    PushUrl url;
    std::string name;                 // APP{labels}, sent as the name parameter
    std::string spy_name = "stackfrag";
    size_t queue_limit = 16;          // profiles waiting to be sent; past it the oldest is dropped
    int max_attempts = 5;             // tries of one profile before it is given up
    uint64_t backoff_first_ms = 500;  // wait after a failure; doubled per failure of the profile
    uint64_t backoff_max_ms = 30'000;
    int connect_timeout_ms = 3'000;
    int request_timeout_ms = 10'000;
    uint64_t sample_rate_hz = 1000;   // samples per second per busy thread (1e9 / interval)
};

struct AgentOptions;
// The settings push=, push_name= and push_labels= ask for; without push_name, the application
// name comes from `java_command` (the JVM's sun.java.command).
PushSettings push_settings_from(const AgentOptions& options, std::string_view java_command);

// One period's profile.
struct PushProfile {
    std::string body;             // the gzip'd profile.proto
    int64_t from_unix = 0;        // the period, unix seconds
    int64_t until_unix = 0;
};

struct PushCounts {
    uint64_t offered = 0;
    uint64_t sent = 0;            // accepted by the server (2xx)
    uint64_t failed_attempts = 0; // requests that failed (each retry of a profile counts)
    uint64_t dropped = 0;         // the queue was full: the oldest waiting profile was dropped
    uint64_t rejected = 0;        // given up: a 4xx other than 429, or max_attempts failures
    uint64_t unsent = 0;          // still queued when stop()'s bound ran out
    size_t queued = 0;            // waiting now (also the one in flight)
};

// The request for `profile`: "/ingest?name=...&from=...&until=...&format=pprof&sampleRate=...&spyName=..."
// (the path of `settings.url` with its query, values percent-encoded).
std::string push_request_target(const PushSettings& settings, const PushProfile& profile);

class ProfilePusher {
public:
    explicit ProfilePusher(PushSettings settings);
    ~ProfilePusher();   // stop(1000) if still running
    ProfilePusher(const ProfilePusher&) = delete;
    ProfilePusher& operator=(const ProfilePusher&) = delete;

    // Starts the sender thread (a plain pthread, every signal blocked).
    Status start();
    // Any thread: queues `profile` and returns at once; when the queue is full the oldest waiting
    // profile is dropped (counted, logged once per outage). False after stop().
    bool offer(PushProfile profile);
    // The same for a period's tree, written as gzip'd pprof here (on the caller's thread).
    bool offer(const profile::Cct& cct, int64_t from_unix, int64_t until_unix);
    // Sends what is queued within `timeout_ms` (a request in flight is cut at the bound), then ends
    // the sender thread; what is left is counted as unsent. Never waits much past the bound: a
    // sender stuck in the network is left behind. Idempotent.
    void stop(int timeout_ms);

    PushCounts counts() const;
    // One line for the stop summary.
    std::string summary_text() const;
    const PushSettings& settings() const { return settings_; }

private:
    struct Queued {
        PushProfile profile;
        int attempts = 0;
    };
    enum class Outcome : uint8_t { kSent, kRetry, kReject };
    static void* thread_main(void* self);
    void run();
    // One POST; `error` says why it failed; `retry_after_ms` is the server's Retry-After, or 0.
    Outcome send(const PushProfile& profile, std::string& error, uint64_t& retry_after_ms);
    static int progress(void* self, int64_t, int64_t, int64_t, int64_t);   // curl_off_t is int64_t

    const PushSettings settings_;

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    std::deque<Queued> queue_;
    bool in_flight_ = false;       // queue_.front() is being sent
    bool stop_requested_ = false;
    bool finished_ = false;
    uint64_t flush_deadline_ns_ = 0;    // monotonic; 0 until stop()
    uint64_t next_attempt_ns_ = 0;      // backoff of queue_.front()
    bool outage_logged_ = false;        // the server is failing and the log said so
    bool drops_logged_ = false;
    PushCounts counts_;
    std::atomic<bool> abort_{false};    // cuts the request in flight (stop's bound)

    pthread_t thread_{};
    bool started_ = false;
    bool stopped_ = false;
    bool joined_ = false;
};

}  // namespace sf::agent
