// The liveness rule: the agent is live while its housekeeping loop (process scans, attaching,
// expiry) keeps completing ticks. /healthz reads it from the I/O thread, so it takes no lock.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

namespace vigil::agent {

class LoopLiveness {
 public:
  using Clock = std::chrono::steady_clock;

  // `stall_limit`: how long the loop may go without completing a tick; `started`: when it began.
  LoopLiveness(std::chrono::milliseconds stall_limit, Clock::time_point started);

  // The loop was seen running at `at`: it completed a tick (or is about to start its first).
  void ran_at(Clock::time_point at);
  // Seconds since the loop was last seen running.
  double seconds_since_run(Clock::time_point now) const;
  // Empty while live; otherwise one line saying why not.
  std::string stalled(Clock::time_point now) const;
  std::chrono::milliseconds stall_limit() const { return limit_; }

 private:
  const std::chrono::milliseconds limit_;
  std::atomic<Clock::rep> last_run_;  // Clock's time_since_epoch, in its ticks
};

}  // namespace vigil::agent
