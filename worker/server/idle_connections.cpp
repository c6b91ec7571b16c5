// Tickets handed out in increasing order, so the map's first entry is the longest-idle session.
#include "server/idle_connections.h"

namespace vigil {

uint64_t IdleConnections::add(std::weak_ptr<HttpSession> session) {
  std::lock_guard lock(mutex_);
  const uint64_t ticket = next_ticket_++;
  waiting_.emplace(ticket, std::move(session));
  return ticket;
}

void IdleConnections::remove(uint64_t ticket) {
  std::lock_guard lock(mutex_);
  waiting_.erase(ticket);
}

std::shared_ptr<HttpSession> IdleConnections::take_oldest() {
  std::lock_guard lock(mutex_);
  while (!waiting_.empty()) {
    auto session = waiting_.begin()->second.lock();
    waiting_.erase(waiting_.begin());
    if (session) return session;
  }
  return nullptr;
}

}  // namespace vigil
