// The serving process's HTTP side: I/O threads, the listener, and SIGTERM/SIGINT draining.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "server/api.h"
#include "server/model_service.h"
#include "server/serve_config.h"
#include "server/server_state.h"
#include "server/worker_metrics.h"

namespace vigil {

class Listener;

class HttpServer {
 public:
  // Binds config.host:config.port (0: any free port); throws std::runtime_error when it cannot.
  // With handle_signals, SIGTERM and SIGINT start a drain; a second one stops at once.
  HttpServer(ModelService& service, WorkerMetrics& metrics, const ServerConfig& config,
             std::string model_name, bool handle_signals);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  unsigned short port() const;
  // Serves on config.io_threads threads (this one included) until a drain ends; returns then.
  void run();
  // What SIGTERM does, from any thread: /ready turns 503, new completions are refused, the
  // engine drains; run() returns once every request is answered or the grace period is over.
  void begin_drain();

 private:
  void wait_signal();
  void on_drain();
  void poll_drain();

  ModelService& service_;
  const ServerConfig& config_;
  ServerState state_;
  Api api_;
  boost::asio::io_context ioc_;
  std::shared_ptr<Listener> listener_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer drain_timer_;
  std::chrono::steady_clock::time_point drain_deadline_;
  bool cutting_ = false;  // the grace period is over and running requests were cancelled
};

}  // namespace vigil
