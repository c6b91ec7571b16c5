// The agent's HTTP/1.1 endpoint (/metrics, /healthz, /readyz): GET only, one request per
// connection, served concurrently with a deadline per request and a cap on open connections;
// with a web config (--web.config.file), over TLS and behind basic auth as it says.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "export/web_config_watch.h"
#include "stats/http_stats.h"

namespace vigil::agent {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

struct HttpRoute {
  std::string path;
  // Answered on the I/O thread: must not block or take a lock a scrape holds (health,
  // readiness). Other routes run on the render thread, one call at a time; requests that
  // arrive while one is running share the next call's answer. Inline routes carry no data and
  // are answered without basic-auth credentials (the kubelet's probes have none to send).
  bool answered_inline = false;
  std::function<HttpResponse()> answer;
};

struct HttpLimits {
  std::chrono::milliseconds request_deadline{10000};  // from accept to the answer's last byte written
  size_t max_head_bytes = 8192;                        // request line and header fields
  size_t max_connections = 64;                         // past it the oldest slow connection is closed
};

class HttpServer {
 public:
  // Binds and listens; throws std::runtime_error with the reason (e.g. address in use). `web`:
  // the web config (TLS, basic auth, headers), consulted at each new connection; null: plain HTTP.
  HttpServer(const std::string& host, int port, std::vector<HttpRoute> routes, HttpStats& stats,
             HttpLimits limits = {}, std::shared_ptr<WebConfigWatch> web = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;  // the bound port (useful when 0 was asked)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vigil::agent
