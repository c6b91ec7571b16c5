// Minimal HTTP server: Prometheus scrapes are rare and small, so connections are served one at a
// time with hard limits (8 KiB request head, 5 s I/O timeouts) and closed after each response.
#include "export/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace vigil::agent {
namespace {

constexpr size_t kMaxRequestHead = 8192;
constexpr int kIoTimeoutMs = 5000;

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

bool wait_fd(int fd, short events) {
  pollfd p{fd, events, 0};
  return poll(&p, 1, kIoTimeoutMs) == 1;
}

void send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    if (!wait_fd(fd, POLLOUT)) return;
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

HttpServer::HttpServer(const std::string& host, int port, HttpHandler handler)
    : handler_(std::move(handler)) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port_text = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res); rc != 0)
    throw std::runtime_error("cannot resolve listen host '" + host + "': " + gai_strerror(rc));
  std::string err;
  for (addrinfo* ai = res; ai && listen_fd_ < 0; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0) {
      listen_fd_ = fd;
    } else {
      err = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(res);
  if (listen_fd_ < 0)
    throw std::runtime_error("cannot listen on " + host + ":" + port_text + ": " + err);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  thread_ = std::thread([this] { serve(); });
}

HttpServer::~HttpServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
}

void HttpServer::serve() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) != 1) continue;  // wake up to notice stop_
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    handle(fd);
    close(fd);
  }
}

void HttpServer::handle(int fd) {
  std::string head;
  char buf[2048];
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    if (head.size() > kMaxRequestHead || !wait_fd(fd, POLLIN)) return;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    head.append(buf, static_cast<size_t>(n));
  }
  HttpResponse resp;
  auto sp1 = head.find(' ');
  auto sp2 = sp1 == std::string::npos ? sp1 : head.find(' ', sp1 + 1);
  if (sp2 == std::string::npos) {
    resp = {400, "text/plain; charset=utf-8", "bad request\n"};
  } else if (head.compare(0, sp1, "GET") != 0) {
    resp = {405, "text/plain; charset=utf-8", "only GET\n"};
  } else {
    std::string path = head.substr(sp1 + 1, sp2 - sp1 - 1);
    if (auto q = path.find('?'); q != std::string::npos) path.resize(q);
    resp = handler_(path);
  }
  std::string out = "HTTP/1.1 " + std::to_string(resp.status) + " " + reason(resp.status) +
                    "\r\nContent-Type: " + resp.content_type +
                    "\r\nContent-Length: " + std::to_string(resp.body.size()) +
                    "\r\nConnection: close\r\n\r\n" + resp.body;
  send_all(fd, out);
}

}  // namespace vigil::agent
