// A minimal HTTP/1.1 server for /metrics, /healthz and /readyz: GET only, bounded, one thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace vigil::agent {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Answers GET PATH; unknown paths get 404 from the handler itself.
using HttpHandler = std::function<HttpResponse(const std::string& path)>;

class HttpServer {
 public:
  // Binds and listens; throws std::runtime_error with the reason (e.g. address in use).
  HttpServer(const std::string& host, int port, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }  // the bound port (useful when 0 was asked)

 private:
  void serve();
  void handle(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  HttpHandler handler_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace vigil::agent
