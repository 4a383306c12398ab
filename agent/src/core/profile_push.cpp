#include "profile_push.hpp"

#include <curl/curl.h>
#include <dlfcn.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>

#include <sstream>
#include <type_traits>

#include "stackfrag/base/clock.hpp"
#include "log.hpp"
#include "own_threads.hpp"
#include "options.hpp"
#include "stackfrag/profile/export.hpp"

namespace sf::agent {

namespace {

bool is_host_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

bool is_app_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

// RFC 3986 unreserved characters stay; everything else is %XX.
std::string percent_encode(std::string_view text) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (std::isalnum(byte) || c == '-' || c == '.' || c == '_' || c == '~') {
            out += c;
        } else {
            out += '%';
            out += kHex[byte >> 4];
            out += kHex[byte & 15];
        }
    }
    return out;
}

size_t collect_response(char* data, size_t size, size_t count, void* user) {
    auto* text = static_cast<std::string*>(user);
    const size_t bytes = size * count;
    if (text->size() < 512) text->append(data, std::min(bytes, 512 - text->size()));
    return bytes;
}

// libcurl, loaded when the first pusher starts rather than linked: it brings ~28 more libraries
// (TLS, Kerberos, LDAP, ...), about 20 ms of loading, which a JVM profiled without push= should
// not pay. Never unloaded (the JVM may exit while a sender is inside it).
struct CurlApi {
    std::string error;   // why it is not there; empty when loaded
    CURLcode (*global_init)(long);
    CURL* (*easy_init)();
    CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
    CURLcode (*easy_perform)(CURL*);
    CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
    void (*easy_cleanup)(CURL*);
    const char* (*easy_strerror)(CURLcode);
    curl_slist* (*slist_append)(curl_slist*, const char*);
    void (*slist_free_all)(curl_slist*);
};

const CurlApi& curl_api() {
    static const CurlApi* api = [] {
        auto* loaded = new CurlApi{};
        // The OpenSSL build (libcurl4), else the GnuTLS one (libcurl3-gnutls): the same ABI.
        void* library = nullptr;
        for (const char* name : {"libcurl.so.4", "libcurl-gnutls.so.4"}) {
            if ((library = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
        }
        if (library == nullptr) {
            loaded->error = "libcurl.so.4 cannot be loaded (install libcurl4): " + std::string(dlerror());
            return loaded;
        }
        bool complete = true;
        auto bind = [&](auto& function, const char* symbol) {
            function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, symbol));
            complete &= function != nullptr;
        };
        bind(loaded->global_init, "curl_global_init");
        bind(loaded->easy_init, "curl_easy_init");
        bind(loaded->easy_setopt, "curl_easy_setopt");
        bind(loaded->easy_perform, "curl_easy_perform");
        bind(loaded->easy_getinfo, "curl_easy_getinfo");
        bind(loaded->easy_cleanup, "curl_easy_cleanup");
        bind(loaded->easy_strerror, "curl_easy_strerror");
        bind(loaded->slist_append, "curl_slist_append");
        bind(loaded->slist_free_all, "curl_slist_free_all");
        if (!complete) {
            loaded->error = "libcurl.so.4 lacks a function stackfrag needs";
            return loaded;
        }
        // Thread-safe in libcurl 7.84 and later; never cleaned up.
        if (const CURLcode init = loaded->global_init(CURL_GLOBAL_DEFAULT); init != CURLE_OK) {
            loaded->error = std::string("libcurl initialisation failed: ") + loaded->easy_strerror(init);
        }
        return loaded;
    }();
    return *api;
}

// One line of a server's answer for the log: control characters become spaces.
std::string printable(std::string text) {
    for (char& c : text) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    }
    return text.size() > 200 ? text.substr(0, 200) + "..." : text;
}

}  // namespace

std::string PushUrl::endpoint() const {
    return scheme + "://" + host + ":" + std::to_string(port) + path;
}

Result<PushUrl> parse_push_url(std::string_view text) {
    PushUrl url;
    const size_t colon = text.find("://");
    if (colon == std::string_view::npos) {
        std::string message(1, '\'');   // appended, not "'" + string: GCC 12 warns falsely (-Wrestrict)
        message.append(text).append("' is not a URL: expected http://HOST[:PORT][/PATH]");
        return make_error(Errc::kInvalidArgument, std::move(message));
    }
    for (const char c : text.substr(0, colon)) url.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (url.scheme != "http" && url.scheme != "https") {
        return make_error(Errc::kInvalidArgument, "scheme '" + url.scheme + "' is not supported: expected http:// or https://");
    }
    std::string_view rest = text.substr(colon + 3);
    for (const char c : rest) {
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
            return make_error(Errc::kInvalidArgument, "the URL has a space or control character");
        }
    }
    if (rest.find_first_of("?#") != std::string_view::npos) {
        return make_error(Errc::kInvalidArgument, "the URL has a query or fragment: stackfrag writes the query (name, from, until, ...) itself");
    }
    const size_t slash = rest.find('/');
    const std::string_view authority = rest.substr(0, slash);
    std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    if (authority.find('@') != std::string_view::npos) {
        return make_error(Errc::kInvalidArgument, "credentials in the URL are not supported (they would show in the log)");
    }
    std::string_view host = authority, port;
    if (authority.starts_with('[')) {
        const size_t close = authority.find(']');
        if (close == std::string_view::npos || close == 1) return make_error(Errc::kInvalidArgument, "bad IPv6 address in the URL");
        for (const char c : authority.substr(1, close - 1)) {
            if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') {
                return make_error(Errc::kInvalidArgument, "bad IPv6 address in the URL");
            }
        }
        host = authority.substr(0, close + 1);
        const std::string_view after = authority.substr(close + 1);
        if (!after.empty() && !after.starts_with(':')) return make_error(Errc::kInvalidArgument, "bad text after the IPv6 address");
        if (!after.empty()) port = after.substr(1);
    } else {
        const size_t port_colon = authority.rfind(':');
        if (port_colon != std::string_view::npos) {
            host = authority.substr(0, port_colon);
            port = authority.substr(port_colon + 1);
        }
        if (host.empty() || !std::all_of(host.begin(), host.end(), is_host_char)) {
            return make_error(Errc::kInvalidArgument, "bad host '" + std::string(host) + "' in the URL");
        }
    }
    url.host = std::string(host);
    url.port = url.scheme == "https" ? 443 : 80;
    if (port.data() != nullptr) {
        uint32_t value = 0;
        const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
        if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
            return make_error(Errc::kInvalidArgument, "bad port '" + std::string(port) + "' in the URL: expected 1 to 65535");
        }
        url.port = static_cast<uint16_t>(value);
    }
    while (path.ends_with('/')) path.remove_suffix(1);
    url.path = std::string(path);
    if (!url.path.ends_with("/ingest")) url.path += "/ingest";
    return url;
}

bool valid_push_app_name(std::string_view name) {
    return !name.empty() && name.size() <= 200 && std::all_of(name.begin(), name.end(), is_app_name_char);
}

Result<std::string> push_labels_text(std::string_view labels) {
    std::string out;
    while (!labels.empty()) {
        const size_t semicolon = labels.find(';');
        const std::string_view item = labels.substr(0, semicolon);
        labels = semicolon == std::string_view::npos ? std::string_view() : labels.substr(semicolon + 1);
        if (item.empty()) continue;
        const size_t eq = item.find('=');
        const std::string_view key = item.substr(0, eq);
        const std::string_view value = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
        const bool key_ok = !key.empty() && (std::isalpha(static_cast<unsigned char>(key[0])) || key[0] == '_') &&
                            std::all_of(key.begin(), key.end(), [](char c) {
                                return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
                            });
        const bool value_ok = !value.empty() && std::none_of(value.begin(), value.end(), [](char c) {
            return c == '{' || c == '}' || c == ',' || c == '=' || c == '"' || static_cast<unsigned char>(c) < 0x20;
        });
        if (eq == std::string_view::npos || !key_ok || !value_ok) {
            return make_error(Errc::kInvalidArgument, "bad label '" + std::string(item) +
                                                          "': expected key=value (key: letters, digits, _ and .; value: no { } = or quotes)");
        }
        out += out.empty() ? "{" : ",";
        out += std::string(item);
    }
    return out.empty() ? out : out + "}";
}

std::string push_app_name_from_command(std::string_view java_command) {
    std::string_view main = java_command.substr(0, java_command.find(' '));
    if (const size_t slash = main.rfind('/'); slash != std::string_view::npos) main = main.substr(slash + 1);
    if (main.ends_with(".jar")) {
        main.remove_suffix(4);
    } else if (const size_t dot = main.rfind('.'); dot != std::string_view::npos) {
        main = main.substr(dot + 1);   // the main class's simple name
    }
    std::string name(main);
    for (char& c : name) {
        if (!is_app_name_char(c)) c = '_';
    }
    if (name.size() > 200) name.resize(200);
    return name.empty() ? "java" : name;
}

std::string push_request_target(const PushSettings& settings, const PushProfile& profile) {
    return settings.url.path + "?name=" + percent_encode(settings.name) + "&from=" + std::to_string(profile.from_unix) +
           "&until=" + std::to_string(profile.until_unix) + "&format=pprof&sampleRate=" +
           std::to_string(settings.sample_rate_hz) + "&spyName=" + percent_encode(settings.spy_name);
}

PushSettings push_settings_from(const AgentOptions& options, std::string_view java_command) {
    PushSettings settings;
    if (Result<PushUrl> url = parse_push_url(options.push_url); url.ok()) settings.url = std::move(url).value();
    settings.name = (options.push_name.empty() ? push_app_name_from_command(java_command) : options.push_name) +
                    options.push_labels;
    settings.sample_rate_hz = std::max<uint64_t>(1'000'000'000 / std::max<uint64_t>(options.interval_ns, 1), 1);
    return settings;
}

ProfilePusher::ProfilePusher(PushSettings settings) : settings_(std::move(settings)) {}

ProfilePusher::~ProfilePusher() {
    stop(1000);
    if (started_ && !joined_) {
        // stop() left a sender inside a request; the abort flag ends it within about a second.
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return finished_; });
        lock.unlock();
        pthread_join(thread_, nullptr);
    }
}

Status ProfilePusher::start() {
    if (started_) return {};
    if (const CurlApi& curl = curl_api(); !curl.error.empty()) {
        return make_error(Errc::kUnsupported, curl.error, "profiles are not pushed; sampling goes on");
    }
    const int created = create_own_thread(&thread_, &ProfilePusher::thread_main, this, "stackfrag-push");
    if (created != 0) return sys_error(Errc::kResourceLimit, created, "pthread_create(push sender thread)");
    started_ = true;
    return {};
}

bool ProfilePusher::offer(PushProfile profile) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_requested_) return false;
    ++counts_.offered;
    // The oldest profile that is not in flight makes room: the newest periods are worth more.
    const size_t first_waiting = in_flight_ ? 1 : 0;
    if (queue_.size() >= std::max<size_t>(settings_.queue_limit, 1) && queue_.size() > first_waiting) {
        const PushProfile& oldest = queue_[first_waiting].profile;
        if (!drops_logged_) {
            SF_LOG_WARN("push: %zu profiles are waiting for %s; the oldest (%lld..%lld) is dropped, and so are the "
                        "next ones while it stays unreachable (counted in the stop summary)",
                        queue_.size(), settings_.url.endpoint().c_str(), static_cast<long long>(oldest.from_unix),
                        static_cast<long long>(oldest.until_unix));
            drops_logged_ = true;
        }
        if (first_waiting == 0) next_attempt_ns_ = 0;   // the backoff belonged to the dropped one
        queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(first_waiting));
        ++counts_.dropped;
    }
    queue_.push_back(Queued{std::move(profile), 0});
    wake_.notify_all();
    return true;
}

bool ProfilePusher::offer(const profile::Cct& cct, int64_t from_unix, int64_t until_unix) {
    std::ostringstream body;
    if (Status written = profile::write_pprof(cct, body); !written.ok()) {
        SF_LOG_ERROR("push: the profile cannot be encoded: %s", written.error().describe().c_str());
        return false;
    }
    return offer(PushProfile{std::move(body).str(), from_unix, until_unix});
}

void* ProfilePusher::thread_main(void* self) {
    auto* pusher = static_cast<ProfilePusher*>(self);
    try {
        pusher->run();
    } catch (...) {
        SF_LOG_ERROR("push: the sender thread failed; no more profiles are sent");
    }
    std::lock_guard<std::mutex> lock(pusher->mutex_);
    pusher->finished_ = true;
    pusher->done_.notify_all();
    return nullptr;
}

int ProfilePusher::progress(void* self, int64_t, int64_t, int64_t, int64_t) {
    return static_cast<ProfilePusher*>(self)->abort_.load(std::memory_order_relaxed) ? 1 : 0;
}

void ProfilePusher::run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
        const uint64_t now = monotonic_ns();
        if (stop_requested_ && (queue_.empty() || now >= flush_deadline_ns_)) break;
        if (queue_.empty() || now < next_attempt_ns_) {
            uint64_t wait_ns = queue_.empty() ? 1'000'000'000 : next_attempt_ns_ - now;
            if (stop_requested_) wait_ns = std::min(wait_ns, flush_deadline_ns_ - now);
            wake_.wait_for(lock, std::chrono::nanoseconds(wait_ns));
            continue;
        }
        in_flight_ = true;
        const PushProfile profile = queue_.front().profile;   // a copy: offer() may drop others meanwhile
        lock.unlock();
        std::string error;
        uint64_t retry_after_ms = 0;
        const Outcome outcome = send(profile, error, retry_after_ms);
        lock.lock();
        in_flight_ = false;
        Queued& front = queue_.front();
        ++front.attempts;
        if (outcome == Outcome::kSent) {
            ++counts_.sent;
            if (outage_logged_) SF_LOG_INFO("push: %s accepts profiles again", settings_.url.endpoint().c_str());
            outage_logged_ = drops_logged_ = false;
            queue_.pop_front();
            next_attempt_ns_ = 0;
            continue;
        }
        ++counts_.failed_attempts;
        const bool give_up = outcome == Outcome::kReject || front.attempts >= settings_.max_attempts;
        const uint64_t backoff_ms = std::min<uint64_t>(
            std::max(retry_after_ms, settings_.backoff_first_ms << std::min(front.attempts - 1, 20)), settings_.backoff_max_ms);
        if (abort_.load(std::memory_order_relaxed)) {
            // stop()'s bound cut the request: not an outage, and nothing is retried now.
            SF_LOG_INFO("push: the request to %s had no answer when the final flush ran out; cut",
                        settings_.url.endpoint().c_str());
            break;
        }
        if (!outage_logged_) {
            if (outcome == Outcome::kReject) {
                SF_LOG_ERROR("push: %s refused the profile: %s; it is not sent again (check push_name/push_labels)",
                             settings_.url.endpoint().c_str(), error.c_str());
            } else {
                SF_LOG_WARN("push: cannot send the profile to %s: %s; retrying with backoff (first in %llu ms), "
                            "%zu of at most %zu profiles waiting; sampling goes on",
                            settings_.url.endpoint().c_str(), error.c_str(), static_cast<unsigned long long>(backoff_ms),
                            queue_.size(), settings_.queue_limit);
            }
            outage_logged_ = true;
        } else {
            SF_LOG_DEBUG("push: attempt %d failed: %s", front.attempts, error.c_str());
        }
        if (give_up) {
            ++counts_.rejected;
            queue_.pop_front();
            next_attempt_ns_ = 0;
        } else {
            next_attempt_ns_ = monotonic_ns() + backoff_ms * 1'000'000;
        }
    }
    counts_.unsent = queue_.size();
}

ProfilePusher::Outcome ProfilePusher::send(const PushProfile& profile, std::string& error, uint64_t& retry_after_ms) {
    static_assert(std::is_same_v<decltype(&ProfilePusher::progress), curl_xferinfo_callback>);
    const CurlApi& api = curl_api();
    CURL* curl = api.easy_init();
    if (curl == nullptr) {
        error = "curl_easy_init failed";
        return Outcome::kRetry;
    }
    long timeout_ms = settings_.request_timeout_ms;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_requested_) {
            const uint64_t now = monotonic_ns();
            timeout_ms = std::min<long>(timeout_ms, flush_deadline_ns_ > now ? static_cast<long>((flush_deadline_ns_ - now) / 1'000'000) + 1 : 1);
        }
    }
    const std::string url = settings_.url.scheme + "://" + settings_.url.host + ":" + std::to_string(settings_.url.port) +
                            push_request_target(settings_, profile);
    std::string response;
    curl_slist* headers = api.slist_append(nullptr, "Content-Type: application/octet-stream");
    headers = api.slist_append(headers, "Expect:");   // no 100-continue round trip
    api.easy_setopt(curl, CURLOPT_URL, url.c_str());
    api.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    api.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);   // no SIGALRM for DNS timeouts inside the JVM
    api.easy_setopt(curl, CURLOPT_POST, 1L);
    api.easy_setopt(curl, CURLOPT_POSTFIELDS, profile.body.data());
    api.easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(profile.body.size()));
    api.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    api.easy_setopt(curl, CURLOPT_USERAGENT, "stackfrag");
    api.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(settings_.connect_timeout_ms));
    api.easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    api.easy_setopt(curl, CURLOPT_WRITEFUNCTION, &collect_response);
    api.easy_setopt(curl, CURLOPT_WRITEDATA, &response);
    api.easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    api.easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &ProfilePusher::progress);
    api.easy_setopt(curl, CURLOPT_XFERINFODATA, this);
    const CURLcode code = api.easy_perform(curl);
    long status = 0;
    api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_off_t retry_after_s = 0;
    api.easy_getinfo(curl, CURLINFO_RETRY_AFTER, &retry_after_s);
    api.easy_cleanup(curl);
    api.slist_free_all(headers);
    if (code != CURLE_OK) {
        error = api.easy_strerror(code);
        return Outcome::kRetry;
    }
    if (status >= 200 && status < 300) return Outcome::kSent;
    retry_after_ms = retry_after_s > 0 ? static_cast<uint64_t>(retry_after_s) * 1000 : 0;
    error = "HTTP ";
    error.append(std::to_string(status));
    if (!response.empty()) error.append(" ").append(printable(response));
    return status == 429 || status >= 500 ? Outcome::kRetry : Outcome::kReject;
}

void ProfilePusher::stop(int timeout_ms) {
    if (stopped_) return;
    stopped_ = true;
    if (!started_) {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_requested_ = true;
        counts_.unsent = queue_.size();
        return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::unique_lock<std::mutex> lock(mutex_);
    stop_requested_ = true;
    flush_deadline_ns_ = monotonic_ns() + static_cast<uint64_t>(std::max(timeout_ms, 0)) * 1'000'000;
    wake_.notify_all();
    if (!done_.wait_until(lock, deadline, [&] { return finished_; })) {
        // A request in flight past the bound (a server that takes the body and never answers, a
        // DNS lookup that hangs): cut it, and leave the thread if even that takes long.
        abort_.store(true);
        if (!done_.wait_for(lock, std::chrono::milliseconds(500), [&] { return finished_; })) {
            counts_.unsent = queue_.size();
            SF_LOG_WARN("push: the sender is still inside a request to %s after %d ms; it is left behind",
                        settings_.url.endpoint().c_str(), timeout_ms);
            return;
        }
    }
    lock.unlock();
    pthread_join(thread_, nullptr);
    joined_ = true;
}

PushCounts ProfilePusher::counts() const {
    std::lock_guard<std::mutex> lock(mutex_);
    PushCounts out = counts_;
    out.queued = queue_.size();
    return out;
}

std::string ProfilePusher::summary_text() const {
    const PushCounts c = counts();
    char line[512];
    snprintf(line, sizeof line,
             "push: %llu of %llu profiles sent to %s (failed requests: %llu; profiles dropped for a full queue: %llu, "
             "given up: %llu, unsent at stop: %llu)",
             static_cast<unsigned long long>(c.sent), static_cast<unsigned long long>(c.offered),
             settings_.url.endpoint().c_str(), static_cast<unsigned long long>(c.failed_attempts),
             static_cast<unsigned long long>(c.dropped), static_cast<unsigned long long>(c.rejected),
             static_cast<unsigned long long>(c.unsent));
    return line;
}

}  // namespace sf::agent
