#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <memory>
#include <streambuf>

#include <fmt/format.h>

#include "stackfrag/profile/export.hpp"

namespace sf::profile {
namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

const char* accepted_profile_extensions() { return ".collapsed, .folded, .html, .pb.gz, .json, .jfr"; }

Result<ProfileFormat> format_for_path(std::string_view path) {
    if (ends_with(path, ".collapsed") || ends_with(path, ".folded")) return ProfileFormat::kCollapsed;
    if (ends_with(path, ".html")) return ProfileFormat::kHtml;
    if (ends_with(path, ".pb.gz")) return ProfileFormat::kPprof;
    if (ends_with(path, ".json")) return ProfileFormat::kJson;
    if (ends_with(path, ".jfr")) return ProfileFormat::kJfr;
    size_t slash = path.rfind('/');
    std::string_view base = path.substr(slash == std::string_view::npos ? 0 : slash + 1);
    size_t dot = base.find('.');
    std::string extension = dot == std::string_view::npos ? std::string("no extension")
                                                          : fmt::format("extension '{}'", base.substr(dot));
    return make_error(Errc::kInvalidArgument,
                      fmt::format("{}: unknown profile format ({})", path, extension),
                      fmt::format("name the file with one of {}", accepted_profile_extensions()));
}

namespace {

// An output stream buffer over a descriptor that remembers the first failed write's errno, so the
// error names the reason (a full disk, a file size limit) and not only "failed".
class DescriptorBuffer final : public std::streambuf {
public:
    explicit DescriptorBuffer(int fd) : fd_(fd) { setp(buffer_, buffer_ + sizeof buffer_); }
    int error() const { return error_; }
    bool flush_all() { return sync() == 0; }

protected:
    int_type overflow(int_type ch) override {
        if (!flush_all()) return traits_type::eof();
        if (!traits_type::eq_int_type(ch, traits_type::eof())) {
            *pptr() = traits_type::to_char_type(ch);
            pbump(1);
        }
        return traits_type::not_eof(ch);
    }
    int sync() override {
        const char* data = pbase();
        size_t left = static_cast<size_t>(pptr() - pbase());
        while (left > 0 && error_ == 0) {
            const ssize_t n = ::write(fd_, data, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) error_ = n < 0 ? errno : EIO;
            else data += n, left -= static_cast<size_t>(n);
        }
        setp(buffer_, buffer_ + sizeof buffer_);
        return error_ == 0 ? 0 : -1;
    }

private:
    int fd_;
    int error_ = 0;
    char buffer_[1 << 16];
};

}  // namespace

Status write_file_atomically(const std::string& path, const std::function<Status(std::ostream&)>& produce,
                             std::optional<mode_t> mode) {
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
    std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    std::string temp = dir + "." + base + ".tmp.XXXXXX";
    // mkstemp creates the file (O_EXCL, 0600) and hands back its descriptor: nothing is opened by
    // name again, so a file or symlink planted in a shared directory is never written through.
    int fd = mkostemp(temp.data(), O_CLOEXEC);
    if (fd < 0) return sys_error(Errc::kIo, errno, fmt::format("cannot write {}: cannot create a temporary file beside it", path));
    if (mode.has_value()) {
        fchmod(fd, *mode);
    } else {
        // A profile is meant to be shared like any other output file.
        mode_t mask = umask(0);
        umask(mask);
        fchmod(fd, 0666 & ~mask);
    }

    Status status;
    {
        auto buffer = std::make_unique<DescriptorBuffer>(fd);
        std::ostream out(buffer.get());
        status = produce(out);
        out.flush();
        if (status.ok() && buffer->error() != 0) {
            status = sys_error(Errc::kIo, buffer->error(), fmt::format("cannot write {}", path));
        } else if (status.ok() && !out) {
            status = make_error(Errc::kIo, fmt::format("cannot write {}", path));
        } else if (!status.ok() && buffer->error() != 0) {
            // The producer saw its stream fail; the descriptor knows why.
            status = sys_error(Errc::kIo, buffer->error(), fmt::format("cannot write {}", path));
        }
    }
    if (::close(fd) != 0 && status.ok()) status = sys_error(Errc::kIo, errno, fmt::format("cannot write {}", path));
    // rename replaces a planted symlink itself, never the file it points to.
    if (status.ok() && rename(temp.c_str(), path.c_str()) != 0) {
        status = sys_error(Errc::kIo, errno, fmt::format("cannot write {}: cannot rename {} to it", path, temp));
    }
    if (!status.ok()) unlink(temp.c_str());
    return status;
}

Status write_profile(const Cct& cct, const std::string& path, const HtmlOptions& html, std::optional<mode_t> mode) {
    auto format = format_for_path(path);
    if (!format.ok()) return std::move(format).take_error();
    return write_file_atomically(path, [&](std::ostream& out) -> Status {
        switch (*format) {
            case ProfileFormat::kCollapsed: return write_collapsed(cct, out, html.counter);
            case ProfileFormat::kHtml: return write_html(cct, out, html);
            case ProfileFormat::kPprof: return write_pprof(cct, out);
            case ProfileFormat::kJson: return write_json(cct, out);
            case ProfileFormat::kJfr: return write_jfr(cct, out);
        }
        return make_error(Errc::kInternal, "unhandled profile format");
    }, mode);
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
