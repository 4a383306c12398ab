// A loopback HTTP receiver for the push= tests: a thread on 127.0.0.1 (port 0) that records each
// request (request line, percent-decoded query, headers, body) and answers with the statuses a
// test scripts, one connection per request; and `go tool pprof -top` of a received body.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace sf::test {

using Clock = std::chrono::steady_clock;

struct Request {
    std::string request_line;
    std::string method, path;
    std::map<std::string, std::string> query;     // percent-decoded
    std::map<std::string, std::string> headers;   // names in lower case
    std::string body;
    Clock::time_point at;
};

inline std::string percent_decode(const std::string& text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '%' && i + 2 < text.size()) {
            out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
            i += 2;
        } else {
            out += text[i] == '+' ? ' ' : text[i];
        }
    }
    return out;
}

inline int listening_socket(uint16_t& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(fd, 16) == 0);
    socklen_t length = sizeof address;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port = ntohs(address.sin_port);
    return fd;
}

// Answers the i-th request with statuses[i] (200 once the list is used up), then closes.
class Receiver {
public:
    explicit Receiver(std::vector<int> statuses = {}) : statuses_(std::move(statuses)) {
        fd_ = listening_socket(port_);
        thread_ = std::thread([this] { serve(); });
    }
    ~Receiver() {
        stop_ = true;
        thread_.join();
        ::close(fd_);
    }
    uint16_t port() const { return port_; }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
    std::vector<Request> requests() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return requests_;
    }
    bool wait_for(size_t count, int seconds) const {
        const auto deadline = Clock::now() + std::chrono::seconds(seconds);
        while (requests().size() < count) {
            if (Clock::now() > deadline) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return true;
    }

private:
    void serve() {
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) continue;
            handle(client);
            ::close(client);
        }
    }
    void handle(int client) {
        std::string data;
        char buffer[65536];
        size_t header_end = std::string::npos, content_length = 0;
        Request request;
        const auto deadline = Clock::now() + std::chrono::seconds(10);
        while (Clock::now() < deadline) {
            pollfd p{client, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0) continue;
            const ssize_t n = ::read(client, buffer, sizeof buffer);
            if (n <= 0) return;
            data.append(buffer, static_cast<size_t>(n));
            if (header_end == std::string::npos && (header_end = data.find("\r\n\r\n")) != std::string::npos) {
                std::istringstream head(data.substr(0, header_end));
                std::string line;
                std::getline(head, line);
                request.request_line = line.substr(0, line.find('\r'));
                while (std::getline(head, line)) {
                    line = line.substr(0, line.find('\r'));
                    const size_t colon = line.find(':');
                    if (colon == std::string::npos) continue;
                    std::string name = line.substr(0, colon);
                    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                    request.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
                }
                if (request.headers.count("content-length")) content_length = std::stoul(request.headers["content-length"]);
            }
            if (header_end != std::string::npos && data.size() >= header_end + 4 + content_length) break;
        }
        if (header_end == std::string::npos) return;
        request.body = data.substr(header_end + 4, content_length);
        request.at = Clock::now();
        // "POST /ingest?a=b&c=d HTTP/1.1"
        std::istringstream words(request.request_line);
        std::string target;
        words >> request.method >> target;
        request.path = target.substr(0, target.find('?'));
        if (target.find('?') != std::string::npos) {
            std::istringstream query(target.substr(target.find('?') + 1));
            std::string pair;
            while (std::getline(query, pair, '&')) {
                const size_t eq = pair.find('=');
                request.query[percent_decode(pair.substr(0, eq))] = eq == std::string::npos ? "" : percent_decode(pair.substr(eq + 1));
            }
        }
        size_t index = 0;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            index = requests_.size();
            requests_.push_back(request);
        }
        const int status = index < statuses_.size() ? statuses_[index] : 200;
        const std::string text = status == 200 ? "" : "try later";
        const std::string answer = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: " +
                                   std::to_string(text.size()) + "\r\nConnection: close\r\n\r\n" + text;
        (void)!::write(client, answer.data(), answer.size());
    }

    std::vector<int> statuses_;
    int fd_ = -1;
    uint16_t port_ = 0;
    std::atomic<bool> stop_{false};
    mutable std::mutex mutex_;
    std::vector<Request> requests_;
    std::thread thread_;
};

inline std::string read_all(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// `go tool pprof -top` of `body`; empty when go is missing (the caller warns).
inline std::string pprof_top(const std::string& dir, const std::string& body, const std::string& name) {
    if (std::system("command -v go >/dev/null 2>&1") != 0) return {};
    const std::string path = dir + "/" + name + ".pb.gz", out = dir + "/" + name + ".top";
    std::ofstream(path, std::ios::binary) << body;
    const std::string command = "cd '" + dir + "' && HOME='" + dir + "' GOCACHE='" + dir + "/gocache' GOFLAGS= " +
                                "go tool pprof -top -sample_index=samples '" + path + "' > '" + out + "' 2>&1";
    const int rc = std::system(command.c_str());
    const std::string text = read_all(out);
    INFO(text);
    REQUIRE(rc == 0);
    return text;
}

}  // namespace sf::test
