// The agent's own bookkeeping, guarded by one mutex: it is touched a few times per second at most.
#include "stats/agent_stats.h"

namespace vigil::agent {

void AgentStats::set_enabled(const std::string& set, bool enabled, const std::string& why) {
  std::lock_guard lock(mu_);
  s_.enabled[set] = {enabled, why};
  s_.attached.try_emplace(set, 0);
}

void AgentStats::add_attached(const std::string& set, int n) {
  std::lock_guard lock(mu_);
  s_.attached[set] += n;
}

void AgentStats::attach_failure(const std::string& set, const std::string& reason) {
  std::lock_guard lock(mu_);
  ++s_.attach_failures[{set, reason}];
}

void AgentStats::discovery_refused(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++s_.discovery_refused[reason];
}

void AgentStats::ringbuf_event(const std::string& set) {
  std::lock_guard lock(mu_);
  ++s_.ringbuf_events[set];
}

void AgentStats::record_scrape(const std::string& collector, double seconds) {
  std::lock_guard lock(mu_);
  auto& [count, last] = s_.scrapes[collector];
  ++count;
  last = seconds;
}

void AgentStats::record_housekeeping(double lag_seconds, double duration_seconds) {
  std::lock_guard lock(mu_);
  s_.housekeeping.lag_seconds = lag_seconds;
  s_.housekeeping.duration_seconds = duration_seconds;
  ++s_.housekeeping.ticks;
}

void AgentStats::set_bpf_stats_enabled(bool on) {
  std::lock_guard lock(mu_);
  s_.bpf_stats_enabled = on;
}

void AgentStats::add_kernel_source(const std::string& set, std::function<KernelCounters()> read) {
  std::lock_guard lock(mu_);
  kernel_sources_[set] = std::move(read);
}

void AgentStats::add_table_source(const std::string& set, const std::string& table,
                                  std::function<uint64_t()> count) {
  std::lock_guard lock(mu_);
  if (count) table_sources_[{set, table}] = std::move(count);
  else table_sources_.erase({set, table});
}

AgentStats::Snapshot AgentStats::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot out = s_;
  for (const auto& [set, read] : kernel_sources_) out.kernel[set] = read();
  for (const auto& [key, count] : table_sources_) out.table_entries[key] = count();
  return out;
}

}  // namespace vigil::agent
