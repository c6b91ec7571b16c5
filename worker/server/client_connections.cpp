// Entries are dropped at zero, so the map holds only addresses that have connections now.
#include "server/client_connections.h"

namespace vigil {

std::string ClientConnections::key(const boost::asio::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, address.to_v6()).to_string();
  return address.to_string();
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
