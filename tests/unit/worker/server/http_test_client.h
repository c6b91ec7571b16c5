// A blocking HTTP/1.1 client over a plain socket, for the server tests: sends raw bytes, reads one
// response (Content-Length or chunked), and can hang up whenever a test wants.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace vigil::test {

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked
};

class HttpClient {
 public:
  // source: the IPv4 address to connect from (loopback takes any 127/8 source), as one client
  // address of many; null: the kernel's choice (127.0.0.1).
  explicit HttpClient(unsigned short port, const char* source = nullptr) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (source) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      if (inet_pton(AF_INET, source, &from.sin_addr) != 1 ||
          bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0)
        throw std::runtime_error(std::string("bind to ") + source);
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) throw std::runtime_error("connect");
    // A server bug must fail the test, not hang it.
    timeval tv{30, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~HttpClient() { close(); }
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Tells the server we will send nothing more (it reads EOF), keeping the read side open.
  void half_close() { ::shutdown(fd_, SHUT_WR); }

  void send_raw(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("send");
      off += static_cast<size_t>(n);
    }
  }

  void send_request(const std::string& method, const std::string& path, const std::string& body = "",
                    const std::string& extra_headers = "") {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: test\r\n" + extra_headers;
    if (!body.empty() || method == "POST")
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    send_raw(req + "\r\n" + body);
  }

  // Reads up to and including "\r\n\r\n"; returns the head.
  HttpResult read_head() {
    while (buf_.find("\r\n\r\n") == std::string::npos) fill();
    size_t end = buf_.find("\r\n\r\n");
    std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    HttpResult r;
    r.status = std::atoi(head.substr(9, 3).c_str());
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos) {
      size_t next = head.find("\r\n", pos + 2);
      std::string line = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t v = line.find_first_not_of(' ', colon + 1);
      r.headers[name] = v == std::string::npos ? "" : line.substr(v);
      pos = next;
    }
    return r;
  }

  // Reads the next chunk's data of a chunked body; empty at the last chunk.
  std::string read_chunk() {
    while (buf_.find("\r\n") == std::string::npos) fill();
    size_t eol = buf_.find("\r\n");
    size_t size = std::stoul(buf_.substr(0, eol), nullptr, 16);
    buf_.erase(0, eol + 2);
    while (buf_.size() < size + 2) fill();
    std::string data = buf_.substr(0, size);
    buf_.erase(0, size + 2);
    return data;
  }

  HttpResult read_response() {
    HttpResult r = read_head();
    if (r.headers["transfer-encoding"] == "chunked") {
      for (std::string c = read_chunk(); !c.empty(); c = read_chunk()) r.body += c;
    } else {
      size_t len = std::stoul(r.headers.count("content-length") ? r.headers["content-length"] : "0");
      while (buf_.size() < len) fill();
      r.body = buf_.substr(0, len);
      buf_.erase(0, len);
    }
    return r;
  }

  HttpResult request(const std::string& method, const std::string& path, const std::string& body = "",
                     const std::string& extra_headers = "") {
    send_request(method, path, body, extra_headers);
    return read_response();
  }

  // Everything the server sends until it closes the connection.
  std::string read_to_eof() {
    char tmp[4096];
    for (ssize_t n; (n = ::recv(fd_, tmp, sizeof tmp, 0)) > 0;) buf_.append(tmp, static_cast<size_t>(n));
    return std::exchange(buf_, {});
  }

  // True when the server closed the connection (reads EOF), after any bytes still buffered.
  bool at_eof() {
    char c;
    ssize_t n = ::recv(fd_, &c, 1, 0);
    return n == 0;
  }

 private:
  void fill() {
    char tmp[4096];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) throw std::runtime_error("connection closed by the server");
    buf_.append(tmp, static_cast<size_t>(n));
  }

  int fd_ = -1;
  std::string buf_;
};

}  // namespace vigil::test
