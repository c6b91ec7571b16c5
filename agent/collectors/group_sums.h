// Counters summed over a group of processes (a container's program) rather than per process,
// for what is worth a series per group but not per pid.
#pragma once

#include <chrono>
#include <map>
#include <set>

#include "collectors/metric_builder.h"

namespace vigil::agent {

// What the members that left a group had counted. Added to the live members' counts, it keeps
// the group's sums monotonic while members come and go (a short-lived client every few seconds
// is one continuous series); a group whose last member left longer than `linger` ago is dropped,
// and its series with it, so groups of containers long gone do not pile up.
// Counts needs operator+=. Not thread-safe: the collector that owns it locks.
template <typename Counts>
class RetiredSums {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RetiredSums(Clock::duration linger) : linger_(linger) {}

  void retire(const LabelList& group, const Counts& counts, Clock::time_point now) {
    Group& g = groups_[group];
    g.counts += counts;
    g.last_member = now;
  }

  // Groups in `alive` still have members; the others are dropped once they have lingered.
  void expire(const std::set<LabelList>& alive, Clock::time_point now) {
    for (auto it = groups_.begin(); it != groups_.end();) {
      if (alive.count(it->first)) it->second.last_member = now;
      if (now - it->second.last_member > linger_) it = groups_.erase(it);
      else ++it;
    }
  }

  // The retired sums, to which the caller adds its live members.
  std::map<LabelList, Counts> sums() const {
    std::map<LabelList, Counts> out;
    for (const auto& [labels, g] : groups_) out.emplace(labels, g.counts);
    return out;
  }

 private:
  struct Group {
    Counts counts{};
    Clock::time_point last_member;
  };
  Clock::duration linger_;
  std::map<LabelList, Group> groups_;
};

// The labels of a process's group: its process labels without the pid.
inline LabelList group_of(LabelList process) {
  std::erase_if(process, [](const auto& kv) { return kv.first == "pid"; });
  return process;
}

}  // namespace vigil::agent
