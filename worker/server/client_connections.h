// Open connections per client address, against server.max_connections_per_client, so that one
// address cannot take every slot of server.max_connections.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>

#include <boost/asio/ip/address.hpp>

namespace vigil {

class ClientConnections {
 public:
  // The address a limit applies to: an IPv4 address; an IPv4-mapped IPv6 address (::ffff:a.b.c.d,
  // what a dual-stack listener sees for IPv4 clients) as the IPv4 address it carries; any other
  // IPv6 address as its /64 ("2001:db8:1:2::/64").
  static std::string key(const boost::asio::ip::address& address);

  int count(const std::string& client);
  void add(const std::string& client);
  void remove(const std::string& client);

 private:
  std::mutex mutex_;  // the listener adds; sessions on every I/O thread remove
  std::unordered_map<std::string, int> open_;  // only addresses with at least one connection
};

}  // namespace vigil
