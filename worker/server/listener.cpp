// The accept loop. At server.max_connections the connection that has waited longest for a request
// is closed to make room, so idle keep-alive clients cannot lock out new ones; with none waiting,
// up to server.probe_connections more are accepted for /health and /ready only, so the kubelet's
// probes are never refused for lack of a slot; past those a new connection is closed at once.
#include "server/listener.h"

#include <cstdio>
#include <stdexcept>

#include <boost/asio/strand.hpp>
#include <boost/beast/core/bind_handler.hpp>

#include "server/http_session.h"

namespace vigil {

namespace net = boost::asio;
namespace beast = boost::beast;
using net::ip::tcp;

Listener::Listener(net::io_context& ioc, const tcp::endpoint& endpoint, Api& api, const ServerConfig& config,
                   ServerState& state)
    : ioc_(ioc), acceptor_(net::make_strand(ioc)), api_(api), config_(config), state_(state) {
  auto check = [&](beast::error_code ec, const char* what) {
    if (ec)
      throw std::runtime_error(std::string("cannot ") + what + " " + endpoint.address().to_string() + ":" +
                               std::to_string(endpoint.port()) + ": " + ec.message());
  };
  beast::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  check(ec, "open a socket for");
  acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  check(ec, "set SO_REUSEADDR on");
  acceptor_.bind(endpoint, ec);
  check(ec, "bind");
  acceptor_.listen(net::socket_base::max_listen_connections, ec);
  check(ec, "listen on");
}

void Listener::run() { do_accept(); }

void Listener::do_accept() {
  acceptor_.async_accept(net::make_strand(ioc_), beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
}

void Listener::on_accept(beast::error_code ec, tcp::socket socket) {
  if (ec) {
    if (ec == net::error::operation_aborted) return;
    std::fprintf(stderr, "vigil-worker: accept: %s\n", ec.message().c_str());
  } else if (state_.connections.load() < config_.max_connections || make_room()) {
    std::make_shared<HttpSession>(std::move(socket), api_, config_, state_, false)->run();
  } else if (state_.connections.load() < config_.max_connections + config_.probe_connections) {
    std::make_shared<HttpSession>(std::move(socket), api_, config_, state_, true)->run();
  } else {
    beast::error_code ignored;
    socket.close(ignored);
  }
  do_accept();
}

bool Listener::make_room() {
  auto oldest = state_.idle.take_oldest();
  if (!oldest) return false;
  oldest->evict();
  return true;
}

}  // namespace vigil
