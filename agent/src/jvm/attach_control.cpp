#include "attach_control.hpp"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "log.hpp"

namespace sf::agent {

std::string find_reply_path(std::string_view text) {
    while (!text.empty()) {
        const size_t comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        if (item.starts_with("reply=")) return std::string(item.substr(6));
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
    }
    return {};
}

bool write_reply(const std::string& path, const std::string& text, bool ok, const std::string& error) {
    if (ok) {
        SF_LOG_INFO("attach: %s", text.empty() ? "ok" : text.c_str());
    } else {
        SF_LOG_ERROR("attach: %s", error.c_str());
    }
    if (path.empty()) return true;
    const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        SF_LOG_ERROR("attach: cannot open the reply file %s: %s", path.c_str(), strerror(errno));
        return false;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        SF_LOG_ERROR("attach: the reply file %s is not a regular file of this user; not written", path.c_str());
        close(fd);
        return false;
    }
    std::string all = text;
    if (!all.empty() && all.back() != '\n') all += '\n';
    all += ok ? "ok\n" : "error: " + error + "\n";
    size_t done = 0;
    while (done < all.size()) {
        const ssize_t n = write(fd, all.data() + done, all.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    close(fd);
    return done == all.size();
}

void pin_library() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&pin_library), &info) == 0 || info.dli_fname == nullptr) return;
    // The handle is dropped on purpose: RTLD_NODELETE keeps the mapping whatever dlclose follows.
    (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

}  // namespace sf::agent
