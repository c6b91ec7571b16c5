// State shared by the listener, every session and the shutdown logic.
#pragma once

#include <atomic>

#include "server/client_connections.h"
#include "server/idle_connections.h"

namespace vigil {

struct ServerState {
  std::atomic<bool> draining{false};  // SIGTERM seen: /ready is 503, completions are refused
  std::atomic<int> connections{0};    // open sessions, against server.max_connections (+ probe_connections)
  std::atomic<int> limited{0};        // open sessions of addresses over their share, a pool of their own
  std::atomic<int> in_flight{0};      // requests read and not yet fully answered
  ClientConnections clients;          // open sessions per address, against max_connections_per_client
  IdleConnections idle;               // sessions waiting for a request, evictable at the cap
};

// Counts one request as in flight for as long as it lives (moved along with the request).
class InFlight {
 public:
  InFlight() = default;
  explicit InFlight(ServerState& state) : state_(&state) { state_->in_flight.fetch_add(1); }
  InFlight(InFlight&& other) noexcept : state_(other.state_) { other.state_ = nullptr; }
  InFlight& operator=(InFlight&& other) noexcept {
    if (this != &other) {
      release();
      state_ = other.state_;
      other.state_ = nullptr;
    }
    return *this;
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  ~InFlight() { release(); }

  void release() {
    if (state_) state_->in_flight.fetch_sub(1);
    state_ = nullptr;
  }

 private:
  ServerState* state_ = nullptr;
};

}  // namespace vigil
