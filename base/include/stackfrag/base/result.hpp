// Errors as values for everything that may run inside the JVM: a Result<T> holds either a value
// or an Error that says what failed, the errno behind it, and what the user can do about it.
#pragma once

#include <cerrno>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace sf {

enum class Errc {
    kInvalidArgument,   // a caller or user supplied a bad value
    kPermission,        // the kernel refused for lack of privilege (perf_event_paranoid, CAP_PERFMON)
    kUnsupported,       // the event or feature does not exist on this kernel / JDK
    kResourceLimit,     // RLIMIT_NOFILE, perf_event_mlock_kb, memory
    kIo,                // a file could not be opened, read or written
    kCorrupt,           // input data failed a check (checksum, bounds, magic)
    kTruncated,         // input data ended early
    kInternal,          // a system call failed in a way none of the above explains
};

const char* errc_name(Errc code);

struct Error {
    Errc code = Errc::kInternal;
    int sys_errno = 0;     // errno from the failing call, 0 when none
    std::string message;   // what failed, naming the object (option, file, thread)
    std::string hint;      // what to change so that it works; empty when nothing helps

    // "message (strerror): hint" — the form logs and the CLI print.
    std::string describe() const;
};

Error make_error(Errc code, std::string message, std::string hint = {});
// An Error for a failed system call; `what` names the call and its object.
Error sys_error(Errc code, int err, std::string what, std::string hint = {});

template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
    Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}

    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const Error& error() const { return std::get<1>(v_); }
    Error take_error() && { return std::get<1>(std::move(v_)); }

private:
    std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : error_(std::move(error)), ok_(false) {}

    bool ok() const { return ok_; }
    explicit operator bool() const { return ok_; }
    const Error& error() const { return error_; }
    Error take_error() && { return std::move(error_); }

private:
    Error error_;
    bool ok_ = true;
};

using Status = Result<void>;

}  // namespace sf
