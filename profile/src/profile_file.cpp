#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include <fmt/format.h>

#include "stackfrag/profile/export.hpp"

namespace sf::profile {
namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

const char* accepted_profile_extensions() { return ".collapsed, .folded, .html, .pb.gz, .json"; }

Result<ProfileFormat> format_for_path(std::string_view path) {
    if (ends_with(path, ".collapsed") || ends_with(path, ".folded")) return ProfileFormat::kCollapsed;
    if (ends_with(path, ".html")) return ProfileFormat::kHtml;
    if (ends_with(path, ".pb.gz")) return ProfileFormat::kPprof;
    if (ends_with(path, ".json")) return ProfileFormat::kJson;
    size_t slash = path.rfind('/');
    std::string_view base = path.substr(slash == std::string_view::npos ? 0 : slash + 1);
    size_t dot = base.find('.');
    std::string extension = dot == std::string_view::npos ? std::string("no extension")
                                                          : fmt::format("extension '{}'", base.substr(dot));
    return make_error(Errc::kInvalidArgument,
                      fmt::format("{}: unknown profile format ({})", path, extension),
                      fmt::format("name the file with one of {}", accepted_profile_extensions()));
}

Status write_file_atomically(const std::string& path, const std::function<Status(std::ostream&)>& produce) {
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
    std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    std::string temp = dir + "." + base + ".tmp.XXXXXX";
    int fd = mkstemp(temp.data());
    if (fd < 0) return sys_error(Errc::kIo, errno, fmt::format("cannot create a temporary file next to {}", path));
    // mkstemp makes the file 0600; a profile is meant to be shared like any other output file.
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    close(fd);

    Status status;
    {
        std::ofstream out(temp, std::ios::binary | std::ios::trunc);
        if (!out) {
            status = sys_error(Errc::kIo, errno, fmt::format("cannot open {}", temp));
        } else {
            status = produce(out);
            out.close();
            if (status.ok() && out.fail()) status = make_error(Errc::kIo, fmt::format("writing {} failed", temp));
        }
    }
    if (status.ok() && rename(temp.c_str(), path.c_str()) != 0) {
        status = sys_error(Errc::kIo, errno, fmt::format("cannot rename {} to {}", temp, path));
    }
    if (!status.ok()) unlink(temp.c_str());
    return status;
}

Status write_profile(const Cct& cct, const std::string& path, const HtmlOptions& html) {
    auto format = format_for_path(path);
    if (!format.ok()) return std::move(format).take_error();
    return write_file_atomically(path, [&](std::ostream& out) -> Status {
        switch (*format) {
            case ProfileFormat::kCollapsed: return write_collapsed(cct, out, html.counter);
            case ProfileFormat::kHtml: return write_html(cct, out, html);
            case ProfileFormat::kPprof: return write_pprof(cct, out);
            case ProfileFormat::kJson: return write_json(cct, out);
        }
        return make_error(Errc::kInternal, "unhandled profile format");
    });
}

Result<Cct> read_profile(const std::string& path) {
    auto format = format_for_path(path);
    if (!format.ok()) return std::move(format).take_error();
    if (*format != ProfileFormat::kCollapsed && *format != ProfileFormat::kJson) {
        return make_error(Errc::kUnsupported, fmt::format("{}: profiles are read from .json or collapsed files", path));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) return sys_error(Errc::kIo, errno, fmt::format("cannot open {}", path));
    auto cct = *format == ProfileFormat::kJson ? read_json(in) : read_collapsed(in);
    if (!cct.ok()) {
        Error e = std::move(cct).take_error();
        e.message = path + ": " + e.message;
        return e;
    }
    return cct;
}

}  // namespace sf::profile
