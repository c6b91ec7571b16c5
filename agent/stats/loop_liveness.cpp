// The liveness rule, with time passed in so that tests decide it with a clock of their own.
#include "stats/loop_liveness.h"

#include <cstdio>

namespace vigil::agent {

LoopLiveness::LoopLiveness(std::chrono::milliseconds stall_limit, Clock::time_point started)
    : limit_(stall_limit), last_run_(started.time_since_epoch().count()) {}

void LoopLiveness::ran_at(Clock::time_point at) {
  last_run_.store(at.time_since_epoch().count(), std::memory_order_relaxed);
}

double LoopLiveness::seconds_since_run(Clock::time_point now) const {
  Clock::time_point last{Clock::duration(last_run_.load(std::memory_order_relaxed))};
  return std::chrono::duration<double>(now - last).count();
}

std::string LoopLiveness::stalled(Clock::time_point now) const {
  double since = seconds_since_run(now);
  double limit = std::chrono::duration<double>(limit_).count();
  if (since <= limit) return "";
  char line[160];
  std::snprintf(line, sizeof line,
                "housekeeping loop stalled: no tick completed for %.1f s (limit %.1f s)", since, limit);
  return line;
}

}  // namespace vigil::agent
