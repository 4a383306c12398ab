#include "stackfrag/base/result.hpp"

#include <cstring>

namespace sf {

const char* errc_name(Errc code) {
    switch (code) {
        case Errc::kInvalidArgument: return "invalid argument";
        case Errc::kPermission: return "permission denied";
        case Errc::kUnsupported: return "unsupported";
        case Errc::kResourceLimit: return "resource limit";
        case Errc::kIo: return "I/O error";
        case Errc::kCorrupt: return "corrupt data";
        case Errc::kTruncated: return "truncated data";
        case Errc::kInternal: return "internal error";
    }
    return "unknown error";
}

std::string Error::describe() const {
    std::string out = message;
    if (sys_errno != 0) {
        out += " (";
        out += std::strerror(sys_errno);
        out += ")";
    }
    if (!hint.empty()) {
        out += ": ";
        out += hint;
    }
    return out;
}

Error make_error(Errc code, std::string message, std::string hint) {
    return Error{code, 0, std::move(message), std::move(hint)};
}

Error sys_error(Errc code, int err, std::string what, std::string hint) {
    return Error{code, err, std::move(what), std::move(hint)};
}

}  // namespace sf
