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

const std::vector<OutputFormat>& output_formats() {
    static const std::vector<OutputFormat> formats{
        {ProfileFormat::kCollapsed, {".collapsed", ".folded"},
         "collapsed stacks, one line per stack (flamegraph.pl, speedscope, diffs)",
         [](const Cct& cct, std::ostream& out, const HtmlOptions& o) { return write_collapsed(cct, out, o.counter); },
         read_collapsed},
        {ProfileFormat::kHtml, {".html"}, "an interactive flame graph, one self-contained page",
         [](const Cct& cct, std::ostream& out, const HtmlOptions& o) { return write_html(cct, out, o); }, nullptr},
        {ProfileFormat::kPprof, {".pb.gz"}, "pprof's profile.proto, gzipped (go tool pprof)",
         [](const Cct& cct, std::ostream& out, const HtmlOptions&) { return write_pprof(cct, out); }, nullptr},
        {ProfileFormat::kJson, {".json"}, "the calling context tree as json, node ids kept (stackfrag's own)",
         [](const Cct& cct, std::ostream& out, const HtmlOptions&) { return write_json(cct, out); }, read_json},
        {ProfileFormat::kJfr, {".jfr"}, "a JDK Flight Recorder recording (jfr print, JDK Mission Control, IntelliJ)",
         [](const Cct& cct, std::ostream& out, const HtmlOptions&) { return write_jfr(cct, out); }, nullptr},
    };
    return formats;
}

const OutputFormat* output_format_of(std::string_view path) {
    for (const OutputFormat& format : output_formats()) {
        for (std::string_view ending : format.endings) {
            if (ends_with(path, ending)) return &format;
        }
    }
    return nullptr;
}

size_t format_ending_size(std::string_view path) {
    for (const OutputFormat& format : output_formats()) {
        for (std::string_view ending : format.endings) {
            if (ends_with(path, ending)) return ending.size();
        }
    }
    return 0;
}

namespace {

std::string endings_text(std::string_view last_separator) {
    std::vector<std::string_view> all;
    for (const OutputFormat& format : output_formats()) all.insert(all.end(), format.endings.begin(), format.endings.end());
    std::string text;
    for (size_t i = 0; i < all.size(); ++i) {
        if (i != 0) text += i + 1 == all.size() ? last_separator : std::string_view(", ");
        text += all[i];
    }
    return text;
}

}  // namespace

const char* accepted_profile_extensions() {
    static const std::string text = endings_text(", ");
    return text.c_str();
}

const char* accepted_profile_extensions_phrase() {
    static const std::string text = endings_text(" or ");
    return text.c_str();
}

Result<ProfileFormat> format_for_path(std::string_view path) {
    if (const OutputFormat* format = output_format_of(path)) return format->format;
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
    if (Result<ProfileFormat> known = format_for_path(path); !known.ok()) return std::move(known).take_error();
    const OutputFormat& format = *output_format_of(path);
    return write_file_atomically(path, [&](std::ostream& out) -> Status { return format.write(cct, out, html); }, mode);
}

Result<Cct> read_profile(const std::string& path) {
    if (Result<ProfileFormat> known = format_for_path(path); !known.ok()) return std::move(known).take_error();
    const OutputFormat& format = *output_format_of(path);
    if (format.read == nullptr) {
        std::string readable;
        for (const OutputFormat& f : output_formats()) {
            if (f.read != nullptr) {
                for (std::string_view ending : f.endings) readable += fmt::format("{}{}", readable.empty() ? "" : ", ", ending);
            }
        }
        return make_error(Errc::kUnsupported, fmt::format("{}: profiles are read from {} files", path, readable));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) return sys_error(Errc::kIo, errno, fmt::format("cannot open {}", path));
    auto cct = format.read(in);
    if (!cct.ok()) {
        Error e = std::move(cct).take_error();
        e.message = path + ": " + e.message;
        return e;
    }
    return cct;
}

}  // namespace sf::profile
