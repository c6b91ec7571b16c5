// The accept loop. At server.max_connections the connection that has waited longest for a request
// is closed to make room, so idle keep-alive clients cannot lock out new ones; with none waiting,
// up to server.probe_connections more are accepted for /health and /ready only, so the kubelet's
// probes are never refused for lack of a slot; past those a new connection is closed at once.
// Before that, one address's share: at server.max_connections_per_client its own longest-idle
// connection makes room (a pool that grew loses an idle member, not a request); with all of them
// busy the newcomer still reads one request head, answering /health and /ready and 429 to the rest,
// in a pool of server.probe_connections such sessions shared by every address over its share: one
// address never takes the slots of the others or the probes'. Sessions lingering after their last
// answer are as evictable as idle ones, each only for a newcomer of its own pool: a served slot for
// a served one, a probe slot for a probe, an over-share session for another.
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
  } else {
    admit(std::move(socket));
  }
  do_accept();
}

void Listener::admit(tcp::socket socket) {
  beast::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  if (ec) return;  // already reset by the client
  std::string client = ClientConnections::key(remote.address());
  auto admission = Admission::kServe;
  bool room = state_.connections.load() < config_.max_connections;
  const int per_client = config_.max_connections_per_client;
  if (per_client > 0 && state_.clients.count(client) >= per_client) {
    if (make_room_for(client)) room = true;  // the slot it frees is also a slot under max_connections
    else admission = Admission::kClientLimited;
  }
  if (admission == Admission::kClientLimited) {
    // An address over its share never evicts another client's connection, only the spare pool's.
    if (state_.limited.load() < config_.probe_connections || make_room_for(kOverSharePool)) {
      std::make_shared<HttpSession>(std::move(socket), api_, config_, state_, admission, std::move(client))->run();
    } else {
      beast::error_code ignored;
      socket.close(ignored);
    }
    return;
  }
  if (!room) room = make_room();
  if (room) {
    std::make_shared<HttpSession>(std::move(socket), api_, config_, state_, admission, std::move(client))->run();
  } else if (state_.connections.load() < config_.max_connections + config_.probe_connections ||
             make_room_for(kProbePool)) {
    std::make_shared<HttpSession>(std::move(socket), api_, config_, state_, Admission::kProbeOnly, std::move(client))
        ->run();
  } else {
    beast::error_code ignored;
    socket.close(ignored);
  }
}

bool Listener::make_room() {
  auto oldest = state_.idle.take_oldest();
  if (!oldest) return false;
  oldest->evict();
  return true;
}

bool Listener::make_room_for(const std::string& client) {
  auto oldest = state_.idle.take_oldest_of(client);
  if (!oldest) return false;
  oldest->evict();
  return true;
}

}  // namespace vigil

