// Entries are dropped at zero, so the map holds only addresses that have connections now.
#include "server/client_connections.h"

namespace vigil {

std::string ClientConnections::key(const boost::asio::ip::address& address) {
  if (address.is_v4()) return address.to_string();
  const auto v6 = address.to_v6();
  if (v6.is_v4_mapped()) return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_string();
  // One IPv6 host is usually given a whole /64 (RFC 7421): per address it could open a connection
  // from each of 2^64 sources.
  auto bytes = v6.to_bytes();
  for (size_t i = 8; i < bytes.size(); ++i) bytes[i] = 0;
  return boost::asio::ip::address_v6(bytes).to_string() + "/64";
}

int ClientConnections::count(const std::string& client) {
  std::lock_guard lock(mutex_);
  auto it = open_.find(client);
  return it == open_.end() ? 0 : it->second;
}

void ClientConnections::add(const std::string& client) {
  std::lock_guard lock(mutex_);
  ++open_[client];
}

void ClientConnections::remove(const std::string& client) {
  std::lock_guard lock(mutex_);
  auto it = open_.find(client);
  if (it != open_.end() && --it->second == 0) open_.erase(it);
}

}  // namespace vigil
