// The connections waiting for a request, longest-waiting first, so that at the connection cap the
// listener can close one of them instead of refusing a newcomer (a kubelet probe among them).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace vigil {

class HttpSession;

// The keys of sessions that hold none of an address's slots: those of addresses over their share,
// and those admitted past max_connections for the probes. Neither is an address; take_oldest()
// passes them over, since closing one frees no served slot.
inline const std::string kOverSharePool = " over-share";
inline const std::string kProbePool = " probes";

class IdleConnections {
 public:
  // Records a session from `client` (its address key) that started waiting for its next request;
  // the ticket removes it again.
  uint64_t add(std::weak_ptr<HttpSession> session, std::string client);
  // Idempotent: a ticket already taken by take_oldest() is ignored.
  void remove(uint64_t ticket);
  // The session holding a served slot that has waited longest and is still alive, removed from
  // the set; null if none.
  std::shared_ptr<HttpSession> take_oldest();
  // The same, among the sessions of one client address (or pool) only.
  std::shared_ptr<HttpSession> take_oldest_of(const std::string& client);

 private:
  std::mutex mutex_;  // sessions on every I/O thread's strands add and remove
  uint64_t next_ticket_ = 1;
  struct Waiting {
    std::weak_ptr<HttpSession> session;
    std::string client;
  };
  std::map<uint64_t, Waiting> waiting_;  // ticket order is arrival order
};

}  // namespace vigil
