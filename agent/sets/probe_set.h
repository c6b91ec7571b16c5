// A probe set as the agent sees it: a BPF program's loader with the collectors that export its
// maps, what it does with the libraries discovery finds, and its expiry of exited processes. The
// agent loads the sets sets/registry.cpp lists and calls each loaded one; it knows no set by name.
#pragma once

#include <prometheus/collectable.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "discovery/library_scanner.h"
#include "discovery/library_watch.h"
#include "discovery/process_table.h"
#include "probes/ring_reader.h"
#include "stats/agent_stats.h"

namespace vigil::agent {

// A collector and the name its scrapes are timed under (vigil_agent_collector_*{collector}).
struct NamedCollector {
  std::string name;
  std::shared_ptr<prometheus::Collectable> collectable;
};

// Loaded by its constructor (one that throws leaves the set disabled), unloaded by its destructor,
// which runs after the ring reader has stopped. Called from the housekeeping thread.
class ProbeSet {
 public:
  virtual ~ProbeSet() = default;

  // What it exports, asked once after loading.
  virtual std::vector<NamedCollector> collectors() { return {}; }
  // True for sets that probe libraries processes map: the agent then scans the processes' maps
  // (libraries.discover) and loads the proc set to follow execs and exits.
  virtual bool watches_libraries() const { return false; }
  // Discovery found a library it probes (of any kind) mapped in a process.
  virtual void on_library(const LibraryHit& /*hit*/) {}
  // After a full scan: `mapped` is every library some process maps.
  virtual void on_full_scan(const std::vector<LibraryHit>& /*mapped*/) {}
  // Every housekeeping tick (poll_interval): drops the state of processes gone longer than the
  // grace period.
  virtual void expire() {}
  // Between ticks, every 50 ms: what must not wait for a tick.
  virtual void poll() {}
};

// The sets loaded so far, in registry order: a set finds the ones it builds on here.
class LoadedSets {
 public:
  LoadedSets() = default;
  // Last loaded, first unloaded: a set may use one loaded before it.
  ~LoadedSets() {
    while (!sets_.empty()) sets_.pop_back();
  }
  LoadedSets(const LoadedSets&) = delete;
  LoadedSets& operator=(const LoadedSets&) = delete;

  template <typename Set>
  Set* find() const {
    for (const auto& set : sets_)
      if (auto* found = dynamic_cast<Set*>(set.get())) return found;
    return nullptr;
  }
  bool any_watches_libraries() const {
    return std::any_of(sets_.begin(), sets_.end(), [](const auto& set) { return set->watches_libraries(); });
  }
  void add(std::unique_ptr<ProbeSet> set) { sets_.push_back(std::move(set)); }
  auto begin() const { return sets_.begin(); }
  auto end() const { return sets_.end(); }

 private:
  std::vector<std::unique_ptr<ProbeSet>> sets_;
};

// What a set is loaded with.
struct SetContext {
  const Config& cfg;
  AgentStats& stats;
  ProcessTable& processes;
  RingReader& rings;         // not started yet: sets add their rings while loading
  LibraryWatch& libraries;   // the proc set feeds it execs and exits
  const LoadedSets& loaded;  // the sets loaded before this one
};

}  // namespace vigil::agent
