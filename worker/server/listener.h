// Accepts connections and starts a session for each, each on its own strand.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>

#include "server/api.h"
#include "server/serve_config.h"
#include "server/server_state.h"

namespace vigil {

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  // Binds and listens; throws std::runtime_error naming the address and the reason.
  Listener(boost::asio::io_context& ioc, const boost::asio::ip::tcp::endpoint& endpoint, Api& api,
           const ServerConfig& config, ServerState& state);

  void run();
  unsigned short port() const { return acceptor_.local_endpoint().port(); }

 private:
  void do_accept();
  void on_accept(boost::beast::error_code ec, boost::asio::ip::tcp::socket socket);
  void admit(boost::asio::ip::tcp::socket socket);
  // Evicts the longest-idle connection; false when every connection is busy.
  bool make_room();
  // Evicts `client`'s longest-idle connection; false when all of its connections are busy.
  bool make_room_for(const std::string& client);

  boost::asio::io_context& ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  Api& api_;
  const ServerConfig& config_;
  ServerState& state_;
};

}  // namespace vigil
