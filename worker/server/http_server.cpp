// Threads and shutdown. A drain stops admission but keeps the listener open, so probes see /ready
// answer 503 rather than a refused connection while in-flight requests finish.
#include "server/http_server.h"

#include <csignal>
#include <cstdio>
#include <thread>
#include <vector>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>

#include "server/listener.h"

namespace vigil {

namespace net = boost::asio;
using net::ip::tcp;

namespace {

// How long cut requests get to write their error event once the grace period is over.
constexpr std::chrono::seconds kCutFlush{1};

tcp::endpoint endpoint_for(const ServerConfig& config) {
  boost::system::error_code ec;
  auto address = net::ip::make_address(config.host == "localhost" ? "127.0.0.1" : config.host, ec);
  if (ec) throw std::runtime_error("server.host: '" + config.host + "' is not an IP address");
  return {address, static_cast<unsigned short>(config.port)};
}

}  // namespace

HttpServer::HttpServer(ModelService& service, WorkerMetrics& metrics, const ServerConfig& config,
                       std::string model_name, bool handle_signals)
    : service_(service),
      config_(config),
      api_(service, metrics, state_, std::move(model_name)),
      ioc_(config.io_threads),
      signals_(ioc_),
      drain_timer_(ioc_) {
  api_.set_retry_after(config.retry_after_seconds);
  api_.set_access(config.access);
  api_.start_parsing(config.parse_threads, config.max_queued_parses);
  api_.set_max_requests_per_client(config.max_requests_per_client);
  listener_ = std::make_shared<Listener>(ioc_, endpoint_for(config), api_, config_, state_);
  if (handle_signals) {
    signals_.add(SIGTERM);
    signals_.add(SIGINT);
    wait_signal();
  }
}

HttpServer::~HttpServer() = default;

unsigned short HttpServer::port() const { return listener_->port(); }

void HttpServer::run() {
  listener_->run();
  std::vector<std::thread> threads;
  for (int i = 1; i < config_.io_threads; ++i) threads.emplace_back([this] { ioc_.run(); });
  ioc_.run();
  for (auto& t : threads) t.join();
  api_.stop_parsing();  // a parse still running posts its answer to ioc_, which must outlive it
}

void HttpServer::begin_drain() {
  net::post(ioc_, [this] { on_drain(); });
}

void HttpServer::wait_signal() {
  signals_.async_wait([this](boost::system::error_code ec, int signo) {
    if (ec) return;
    if (state_.draining.load()) {
      // A second signal means "now": the operator is done waiting for the drain.
      std::fprintf(stderr, "vigil-worker: %s again, exiting without waiting (%d requests cut)\n",
                   signo == SIGINT ? "SIGINT" : "SIGTERM", state_.in_flight.load());
      ioc_.stop();
      return;
    }
    on_drain();
    wait_signal();
  });
}

void HttpServer::on_drain() {
  if (state_.draining.exchange(true)) return;
  service_.drain();
  drain_deadline_ = std::chrono::steady_clock::now() + config_.drain_grace;
  std::fprintf(stderr, "vigil-worker: draining: %d requests in flight, grace period %.1f s\n",
               state_.in_flight.load(), std::chrono::duration<double>(config_.drain_grace).count());
  poll_drain();
}

void HttpServer::poll_drain() {
  const int left = state_.in_flight.load();
  if (left == 0) {
    std::fprintf(stderr, "vigil-worker: drained, exiting\n");
    ioc_.stop();
    return;
  }
  if (std::chrono::steady_clock::now() >= drain_deadline_) {
    if (!cutting_) {
      // Cancelled requests end with an error event; give their sessions a moment to write it.
      std::fprintf(stderr, "vigil-worker: grace period over, %d requests cut\n", left);
      cutting_ = true;
      api_.cancel_running();
      drain_deadline_ = std::chrono::steady_clock::now() + kCutFlush;
    } else {
      std::fprintf(stderr, "vigil-worker: %d cut requests still unanswered, exiting\n", left);
      ioc_.stop();
      return;
    }
  }
  drain_timer_.expires_after(std::chrono::milliseconds(20));
  drain_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) poll_drain();
  });
}

}  // namespace vigil
