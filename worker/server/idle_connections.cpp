// Tickets handed out in increasing order, so the map's first entry is the longest-idle session.
#include "server/idle_connections.h"

namespace vigil {

uint64_t IdleConnections::add(std::weak_ptr<HttpSession> session, std::string client) {
  std::lock_guard lock(mutex_);
  const uint64_t ticket = next_ticket_++;
  waiting_.emplace(ticket, Waiting{std::move(session), std::move(client)});
  return ticket;
}

void IdleConnections::remove(uint64_t ticket) {
  std::lock_guard lock(mutex_);
  waiting_.erase(ticket);
}

std::shared_ptr<HttpSession> IdleConnections::take_oldest() {
  std::lock_guard lock(mutex_);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second.client == kOverSharePool || it->second.client == kProbePool) {
      ++it;
      continue;
    }
    auto session = it->second.session.lock();
    it = waiting_.erase(it);
    if (session) return session;
  }
  return nullptr;
}

// A linear scan: this runs only when an address is at its limit, and the set holds at most
// server.max_connections sessions.
std::shared_ptr<HttpSession> IdleConnections::take_oldest_of(const std::string& client) {
  std::lock_guard lock(mutex_);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second.client != client) {
      ++it;
      continue;
    }
    auto session = it->second.session.lock();
    it = waiting_.erase(it);
    if (session) return session;
  }
  return nullptr;
}

}  // namespace vigil
