// The running agent: one object owns the loaded probe sets (sets/registry.cpp), their collectors
// and the HTTP endpoint; leaving run_agent destroys them in reverse order, which detaches every
// link before the process exits.
//
// Threads, and what they share:
// - the main thread: housekeeping every poll_interval (/proc scans, attaching, expiry), which
//   may take seconds on a busy node, and the sets' polls between ticks (NCCL correlation);
// - the ring reader (probes/ring_reader): drains every BPF ring buffer as events arrive, so a
//   slow /proc scan never lets a ring fill. Its callbacks touch processes_ (own lock), libraries_
//   (own lock), stats_ (own lock), the correlator (own lock), the probes' log limiters and the XID
//   probe's recent lines (reader thread only);
// - the HTTP endpoint's I/O thread: connections, /healthz and /readyz from atomics only (the
//   liveness rule, ready_), so they are answered while a scrape waits for a lock;
// - the HTTP endpoint's render thread: scrapes (collectors read BPF maps and processes_).
// The locks the reader can wait for are held briefly: libraries_'s never across a /proc read;
// processes_'s across reading one /proc/PID/comm and cgroup; stats_'s
// during a scrape's count of the BPF tables (map walks, milliseconds), which the rings absorb.
#include "agent.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "collectors/endpoint_collector.h"
#include "collectors/process_collector.h"
#include "collectors/self_collector.h"
#include "discovery/library_watch.h"
#include "discovery/process_table.h"
#include "export/exposition.h"
#include "export/http_server.h"
#include "probes/bpf_util.h"
#include "probes/ring_reader.h"
#include "probes/run_time_stats.h"
#include "sets/probe_set.h"
#include "sets/registry.h"
#include "stats/agent_stats.h"
#include "stats/http_stats.h"
#include "stats/loop_liveness.h"
#include "stats/series_account.h"

namespace vigil::agent {
namespace {

class Agent {
 public:
  explicit Agent(const Config& cfg)
      : cfg_(cfg),
        run_time_stats_(cfg.bpf_stats),
        pod_names_(cfg.container_logs),
        processes_("/proc", cfg.grace_period),
        libraries_("/proc", cfg.discovery_interval, stats_),
        liveness_(stall_limit(cfg), LoopLiveness::Clock::now()) {
    processes_.set_pod_names(&pod_names_);
    if (!run_time_stats_.why_not().empty() && run_time_stats_.why_not() != "disabled_by_config")
      std::fprintf(stderr, "vigil-agent: BPF run-time statistics off (%s): program run time is not counted\n",
                   run_time_stats_.why_not().c_str());
    stats_.set_bpf_stats_enabled(run_time_stats_.counting());
  }

  // No ring callback may run once the sets start going away.
  ~Agent() { rings_.reset(); }

  void load_probe_sets() {
    rings_ = std::make_unique<RingReader>();
    SetContext ctx{cfg_, stats_, processes_, *rings_, libraries_, sets_};
    for (const ProbeSetEntry& entry : probe_set_registry())
      if (!entry.applies || entry.applies(sets_)) load_set(entry, ctx);
    collectors_.push_back({"self", std::make_shared<SelfCollector>(stats_)});
    collectors_.push_back({"process", std::make_shared<ProcessCollector>()});
    collectors_.push_back({"endpoint", std::make_shared<EndpointCollector>(http_stats_, liveness_)});
    stats_.add_table_source("agent", "process_labels", [this] { return processes_.size(); });
    stats_.add_table_source("agent", "exec_scans", [this] { return libraries_.pending_exec_scans(); });
    rings_->start();
  }

  // Between housekeeping ticks (the rings are drained by their own thread).
  void poll() {
    for (const auto& set : sets_) set->poll();
  }

  // Live while the housekeeping loop completes ticks; ready once its first tick has attached to
  // what was running (docs/probes-agent.md, The endpoint).
  std::vector<HttpRoute> routes() {
    return {
        {"/metrics", false, [this] { return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", scrape()}; }},
        {"/healthz", true, [this] {
           std::string stalled = liveness_.stalled(LoopLiveness::Clock::now());
           return stalled.empty() ? HttpResponse{200, "text/plain; charset=utf-8", "ok\n"}
                                  : HttpResponse{503, "text/plain; charset=utf-8", stalled + "\n"};
         }},
        {"/readyz", true, [this] {
           return ready_ ? HttpResponse{200, "text/plain; charset=utf-8", "ready\n"}
                         : HttpResponse{503, "text/plain; charset=utf-8", "starting\n"};
         }},
    };
  }

  HttpStats& http_stats() { return http_stats_; }
  // The loop starts now: loading the probe sets before it does not count against the limit.
  void loop_starting() { liveness_.ran_at(LoopLiveness::Clock::now()); }

  // `lag`: how late this tick starts against its schedule.
  void housekeeping(std::chrono::duration<double> lag) {
    auto start = std::chrono::steady_clock::now();
    processes_.sweep();
    if (cfg_.libraries.discover && sets_.any_watches_libraries()) discover();
    for (const auto& set : sets_) set->expire();
    stats_.set_bpf_stats_enabled(run_time_stats_.counting());
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    stats_.record_housekeeping(lag.count(), took.count());
    liveness_.ran_at(LoopLiveness::Clock::now());
    ready_ = true;
  }

 private:
  // Loads one probe set; a set that cannot load is disabled, logged and reported, not fatal.
  void load_set(const ProbeSetEntry& entry, SetContext& ctx) {
    const bool reported = entry.enabled != nullptr;
    if (reported && !(cfg_.probes.*entry.enabled)) {
      stats_.set_enabled(entry.name, false, "disabled_by_config");
      return;
    }
    const char* reason = nullptr;
    try {
      std::unique_ptr<ProbeSet> set = entry.load(ctx);
      if (!set) return;
      for (auto& c : set->collectors()) collectors_.push_back(std::move(c));
      sets_.add(std::move(set));
      if (reported) stats_.set_enabled(entry.name, true, "");
      return;
    } catch (const TracepointMissing& e) {
      std::fprintf(stderr, "vigil-agent: %s probes disabled: %s\n", entry.name, e.what());
      reason = "tracepoint_missing";
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vigil-agent: %s probes disabled: %s\n", entry.name, e.what());
      reason = "load_failed";
    }
    if (reported) stats_.set_enabled(entry.name, false, reason);
  }

  void discover() {
    // The hits' files stay open until every set has attached (libbpf and the kernel open them
    // through /proc/self/fd); attached probes hold the inode, not the file.
    LibraryWatch::Scan scan = libraries_.scan();
    // Libraries no process maps any more lose their probes after the grace period.
    if (scan.full)
      for (const auto& set : sets_) set->on_full_scan(scan.mapped);
    for (const auto& hit : scan.hits)
      for (const auto& set : sets_) set->on_library(hit);
  }

  std::string scrape() {
    std::vector<prometheus::MetricFamily> all;
    for (const auto& c : collectors_) {
      auto start = std::chrono::steady_clock::now();
      auto families = c.collectable->Collect();
      std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      stats_.record_scrape(c.name, took.count());
      for (auto& f : families) all.push_back(std::move(f));
    }
    series_.observe(all);
    for (auto& f : series_.families()) all.push_back(std::move(f));
    return render_exposition(all);
  }

  const Config& cfg_;
  RunTimeStats run_time_stats_;  // on before any program loads, off after the last unloads
  AgentStats stats_;
  SeriesAccount series_;
  PodNameIndex pod_names_;
  ProcessTable processes_;
  LibraryWatch libraries_;
  LoadedSets sets_;  // unloaded in reverse load order
  HttpStats http_stats_;
  LoopLiveness liveness_;
  std::vector<NamedCollector> collectors_;  // the sets' in registry order, then the agent's own
  std::atomic<bool> ready_{false};
  // Declared last, destroyed first (and reset explicitly in ~Agent): stops the reader thread
  // before anything its callbacks use goes away.
  std::unique_ptr<RingReader> rings_;
};

}  // namespace

int run_agent(const Config& cfg, const std::atomic<bool>& stop) {
  Agent agent(cfg);
  std::shared_ptr<WebConfigWatch> web;
  try {
    if (!cfg.web_config_file.empty()) web = std::make_shared<WebConfigWatch>(cfg.web_config_file, agent.http_stats());
  } catch (const ConfigKeyError& e) {
    std::fprintf(stderr, "vigil-agent: web config %s: %s: %s\n", cfg.web_config_file.c_str(), e.key().c_str(), e.what());
    return 2;
  }
  // Asked before the server starts: from then on only its I/O thread consults the watch.
  const char* served_as = !web ? "" : web->current()->tls ? " (TLS, web config)" : " (web config)";
  agent.load_probe_sets();
  std::unique_ptr<HttpServer> http;
  try {
    http = std::make_unique<HttpServer>(cfg.listen_host, cfg.listen_port, agent.routes(), agent.http_stats(),
                                        HttpLimits{}, web);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vigil-agent: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "vigil-agent: serving /metrics, /healthz, /readyz on %s:%d%s\n", cfg.listen_host.c_str(),
               http->port(), served_as);
  agent.loop_starting();
  auto next = std::chrono::steady_clock::now();
  while (!stop) {
    if (auto now = std::chrono::steady_clock::now(); now >= next) {
      agent.housekeeping(now - next);
      next = std::chrono::steady_clock::now() + cfg.poll_interval;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    agent.poll();
  }
  std::fputs("vigil-agent: stopping, detaching probes\n", stderr);
  return 0;
}

}  // namespace vigil::agent
