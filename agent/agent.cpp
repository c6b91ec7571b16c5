// The running agent: one object owns every probe set, collector and the HTTP endpoint; leaving
// run_agent destroys them in reverse order, which detaches every link before the process exits.
//
// Threads, and what they share:
// - the main thread: housekeeping every poll_interval (/proc scans, attaching, expiry), which
//   may take seconds on a busy node, and the NCCL correlation poll;
// - the ring reader (probes/ring_reader): drains every BPF ring buffer as events arrive, so a
//   slow /proc scan never lets a ring fill. Its callbacks touch processes_ (own lock), exec_scans_
//   (exec_mu_), stats_ (own lock), correlator_ (own lock), the probes' log limiters and the XID
//   probe's recent lines (reader thread only);
// - the HTTP server's thread: scrapes (collectors read BPF maps and processes_).
// The locks the reader can wait for are held briefly: exec_mu_ never across a /proc read;
// processes_'s across reading one /proc/PID/comm and cgroup and a `tracked` map update; stats_'s
// during a scrape's count of the BPF tables (map walks, milliseconds), which the rings absorb.
#include "agent.h"

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <prometheus/text_serializer.h>

#include "collectors/agent_stats.h"
#include "collectors/allocator_collector.h"
#include "collectors/cuda_graph_collector.h"
#include "collectors/gpu_memory_collector.h"
#include "collectors/nccl_collector.h"
#include "collectors/self_collector.h"
#include "collectors/tcp_collector.h"
#include "collectors/xid_collector.h"
#include "correlate/collective_probe.h"
#include "correlate/correlator.h"
#include "discovery/library_scanner.h"
#include "discovery/process_table.h"
#include "export/http_server.h"
#include "probes/cuda_probe.h"
#include "probes/nccl_probe.h"
#include "probes/proc_probe.h"
#include "probes/ring_reader.h"
#include "probes/tcp_probe.h"
#include "probes/usdt_probe.h"
#include "probes/xid_probe.h"

namespace vigil::agent {
namespace {

struct NamedCollector {
  std::string name;
  std::shared_ptr<prometheus::Collectable> collectable;
};

class Agent {
 public:
  explicit Agent(const Config& cfg)
      : cfg_(cfg), processes_("/proc", cfg.grace_period) {}

  ~Agent() {
    // No ring callback may run once the probes start going away, and the process table must
    // stop mirroring into the proc set's map before that set goes.
    rings_.reset();
    processes_.set_on_change(nullptr);
  }

  void load_probe_sets() {
    rings_ = std::make_unique<RingReader>();
    load_set("tcp", cfg_.probes.tcp, [this] {
      tcp_ = std::make_unique<TcpProbe>(cfg_.kernel_btf, stats_);
      tcp_collector_ = std::make_shared<TcpCollector>(tcp_->peers_fd(), tcp_->procs_fd(), cfg_.tcp_top_peers,
                                                      processes_);
      collectors_.push_back({"tcp", tcp_collector_});
    });
    // A loaded uprobe set has nothing to watch until a library is found: that is not an error.
    load_set("cuda", cfg_.probes.cuda, [this] {
      auto cuda = std::make_unique<CudaProbe>(cfg_.kernel_btf, stats_);
      cuda->add_rings(*rings_);
      cuda_ = std::move(cuda);
      gpu_memory_ = std::make_shared<GpuMemoryCollector>(cuda_->procs_fd(), cuda_->errors_fd(), cuda_->live_fd(),
                                                         cuda_->handles_fd(), cfg_.fragmentation_window, processes_);
      collectors_.push_back({"gpu_memory", gpu_memory_});
      collectors_.push_back(
          {"cuda_graph", std::make_shared<CudaGraphCollector>(cuda_->procs_fd(), cuda_->errors_fd(), processes_)});
      for (const auto& path : cfg_.libraries.cuda) cuda_->attach_pinned(path);
    });
    load_set("nccl", cfg_.probes.nccl, [this] {
      auto nccl = std::make_unique<NcclProbe>(cfg_.kernel_btf, stats_);
      nccl->add_rings(*rings_);
      nccl_ = std::move(nccl);
      nccl_collector_ = std::make_shared<NcclCollector>(nccl_->calls_fd(), nccl_->async_errors_fd(),
                                                        nccl_->procs_fd(), processes_);
      collectors_.push_back({"nccl", nccl_collector_});
      for (const auto& path : cfg_.libraries.nccl) nccl_->attach_pinned(path);
    });
    load_set("usdt", cfg_.probes.usdt, [this] {
      usdt_ = std::make_unique<UsdtProbe>(cfg_.kernel_btf, stats_);
      allocators_ = std::make_shared<AllocatorCollector>(usdt_->allocators_fd(), usdt_->blocks_fd(),
                                                         cuda_ ? cuda_->procs_fd() : -1, processes_);
      collectors_.push_back({"allocator", allocators_});
      for (const auto& path : cfg_.libraries.usdt) usdt_->attach(path);
    });
    // Correlation needs the TCP state; failures come from NCCL's probes and the worker's own.
    if (tcp_) {
      correlator_ = std::make_shared<Correlator>(tcp_->conns_fd(), nccl_ ? nccl_->procs_fd() : -1,
                                                 nccl_ ? nccl_->async_errors_fd() : -1, cfg_.collective_timeout,
                                                 processes_);
      collectors_.push_back({"correlation", correlator_});
      load_set("collective", cfg_.probes.usdt, [this] {
        auto collectives = std::make_unique<CollectiveProbe>(
            cfg_.kernel_btf, stats_, [this](const collective_failure& f) { correlator_->on_collective_failure(f); });
        collectives->add_rings(*rings_);
        collectives_ = std::move(collectives);
        correlator_->set_collective_procs_fd(collectives_->procs_fd());
        for (const auto& path : cfg_.libraries.usdt) collectives_->attach(path);
      });
    }
    load_set("xid", cfg_.probes.xid, [this] {
      auto xid = std::make_unique<XidProbe>(cfg_.kernel_btf, stats_);
      xid->add_rings(*rings_);
      xid_ = std::move(xid);
      collectors_.push_back({"xid", std::make_shared<XidCollector>(xid_->xids_fd())});
    });
    if (cuda_ || nccl_ || usdt_) {
      try {
        auto proc = std::make_unique<ProcProbe>(cfg_.kernel_btf, stats_, [this](uint32_t pid, bool exec) {
          on_process_event(pid, exec);
        });
        proc->add_rings(*rings_);
        proc_ = std::move(proc);
        // The kernel sends the exit of the processes in the table only.
        processes_.set_on_change([p = proc_.get()](uint32_t pid, bool present) { p->track(pid, present); });
      } catch (const std::exception& e) {
        // Without exec events every tick is a full scan: slower to run, as quick to find.
        std::fprintf(stderr, "vigil-agent: process events unavailable (%s); scanning /proc every tick\n", e.what());
      }
    }
    collectors_.push_back({"self", std::make_shared<SelfCollector>(stats_)});
    stats_.add_table_source("agent", "process_labels", [this] { return processes_.size(); });
    stats_.add_table_source("agent", "exec_scans", [this] {
      std::lock_guard lock(exec_mu_);
      return static_cast<uint64_t>(exec_scans_.size());
    });
    rings_->start();
  }

  // Between housekeeping ticks (the rings are drained by their own thread).
  void poll_correlation() {
    if (correlator_) correlator_->poll_nccl();
  }

  HttpResponse handle(const std::string& path) {
    if (path == "/metrics") return {200, "text/plain; version=0.0.4; charset=utf-8", scrape()};
    if (path == "/healthz") return {200, "text/plain; charset=utf-8", "ok\n"};
    if (path == "/readyz")
      return ready_ ? HttpResponse{200, "text/plain; charset=utf-8", "ready\n"}
                    : HttpResponse{503, "text/plain; charset=utf-8", "starting\n"};
    return {404, "text/plain; charset=utf-8", "not found; try /metrics, /healthz, /readyz\n"};
  }

  void housekeeping() {
    processes_.sweep();
    if (cfg_.libraries.discover && (cuda_ || nccl_ || usdt_)) discover();
    if (tcp_collector_) tcp_collector_->expire();
    if (gpu_memory_) gpu_memory_->sample();
    if (nccl_collector_) nccl_collector_->expire();
    if (allocators_) allocators_->expire();
    if (correlator_) correlator_->expire();
    ready_ = true;
  }

 private:
  // Loads one probe set; a set that cannot load is disabled, logged and reported, not fatal.
  template <typename Load>
  void load_set(const char* set, bool enabled, Load load) {
    if (!enabled) {
      stats_.set_enabled(set, false, "disabled_by_config");
      return;
    }
    try {
      load();
      stats_.set_enabled(set, true, "");
    } catch (const TracepointMissing& e) {
      std::fprintf(stderr, "vigil-agent: %s probes disabled: %s\n", set, e.what());
      stats_.set_enabled(set, false, "tracepoint_missing");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vigil-agent: %s probes disabled: %s\n", set, e.what());
      stats_.set_enabled(set, false, "load_failed");
    }
  }

  // A process that just exec'd maps its libraries during the next moments (the dynamic linker
  // runs after exec): scan it on every tick for a while. Libraries dlopen'ed later are found by
  // the full scan every discovery_interval.
  using Clock = std::chrono::steady_clock;
  static constexpr auto kExecScanFor = std::chrono::seconds(3);

  // On the ring reader's thread.
  void on_process_event(uint32_t pid, bool exec) {
    if (exec) {
      processes_.mark_exec(pid);
      std::lock_guard lock(exec_mu_);
      exec_scans_[pid] = Clock::now() + kExecScanFor;
    } else {
      processes_.mark_exited(pid);
      std::lock_guard lock(exec_mu_);
      exec_scans_.erase(pid);
    }
  }

  void discover() {
    auto now = Clock::now();
    std::vector<LibraryHit> hits;
    const bool full = !proc_ || now >= next_full_scan_;
    if (full) {
      hits = scan_libraries("/proc");
      next_full_scan_ = now + cfg_.discovery_interval;
      release_unmapped(hits);
    }
    // Processes that exec'd recently: scanned (unless the full scan just did) without the lock,
    // since the ring reader adds execs meanwhile. Exits of processes the table does not hold are
    // not sent (bpf/proc.bpf.c), so one found gone is dropped here (kill(pid, 0): no path walk).
    std::vector<std::pair<uint32_t, Clock::time_point>> pids, done;  // pid, scan until
    {
      std::lock_guard lock(exec_mu_);
      pids.assign(exec_scans_.begin(), exec_scans_.end());
    }
    for (const auto& [pid, until] : pids) {
      if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
        done.emplace_back(pid, until);
        continue;
      }
      if (!full)
        for (auto& hit : scan_libraries("/proc", pid)) hits.push_back(std::move(hit));
      if (now >= until) done.emplace_back(pid, until);
    }
    {
      std::lock_guard lock(exec_mu_);
      for (const auto& [pid, until] : done) {
        auto it = exec_scans_.find(pid);
        if (it != exec_scans_.end() && it->second == until) exec_scans_.erase(it);  // else exec'd again since
      }
    }
    for (const auto& hit : hits) {
      if (hit.kind == LibraryKind::kCuda && cuda_) cuda_->attach(hit.open_path, hit.dev, hit.inode);
      if (hit.kind == LibraryKind::kNccl && nccl_) nccl_->attach(hit.open_path, hit.dev, hit.inode);
      if (hit.kind == LibraryKind::kUsdt && usdt_) usdt_->attach(hit.open_path, hit.dev, hit.inode);
      if (hit.kind == LibraryKind::kUsdt && collectives_) collectives_->attach(hit.open_path, hit.dev, hit.inode);
    }
  }

  // Libraries no process maps any more lose their probes after the grace period.
  void release_unmapped(const std::vector<LibraryHit>& hits) {
    std::set<UprobeSet::FileId> cuda, nccl;
    for (const auto& hit : hits) {
      if (hit.kind == LibraryKind::kCuda) cuda.insert({hit.dev, hit.inode});
      if (hit.kind == LibraryKind::kNccl) nccl.insert({hit.dev, hit.inode});
    }
    if (cuda_) cuda_->release_unmapped(cuda, cfg_.grace_period);
    if (nccl_) nccl_->release_unmapped(nccl, cfg_.grace_period);
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
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, all);
    return out.str();
  }

  const Config& cfg_;
  AgentStats stats_;
  ProcessTable processes_;
  std::unique_ptr<TcpProbe> tcp_;
  std::shared_ptr<TcpCollector> tcp_collector_;
  std::unique_ptr<CudaProbe> cuda_;
  std::shared_ptr<GpuMemoryCollector> gpu_memory_;
  std::unique_ptr<NcclProbe> nccl_;
  std::shared_ptr<NcclCollector> nccl_collector_;
  std::unique_ptr<UsdtProbe> usdt_;
  std::shared_ptr<AllocatorCollector> allocators_;
  std::shared_ptr<Correlator> correlator_;
  std::unique_ptr<CollectiveProbe> collectives_;  // after correlator_: its callback uses it
  std::unique_ptr<ProcProbe> proc_;
  std::unique_ptr<XidProbe> xid_;
  std::mutex exec_mu_;  // guards exec_scans_ (ring reader adds, housekeeping scans and removes)
  std::map<uint32_t, std::chrono::steady_clock::time_point> exec_scans_;  // pid -> scan until
  std::chrono::steady_clock::time_point next_full_scan_{};
  std::vector<NamedCollector> collectors_;
  std::atomic<bool> ready_{false};
  // Declared last, destroyed first (and reset explicitly in ~Agent): stops the reader thread
  // before anything its callbacks use goes away.
  std::unique_ptr<RingReader> rings_;
};

}  // namespace

int run_agent(const Config& cfg, const std::atomic<bool>& stop) {
  Agent agent(cfg);
  agent.load_probe_sets();
  std::unique_ptr<HttpServer> http;
  try {
    http = std::make_unique<HttpServer>(cfg.listen_host, cfg.listen_port,
                                        [&agent](const std::string& p) { return agent.handle(p); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vigil-agent: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "vigil-agent: serving /metrics, /healthz, /readyz on %s:%d\n",
               cfg.listen_host.c_str(), http->port());
  auto next = std::chrono::steady_clock::now();
  while (!stop) {
    if (std::chrono::steady_clock::now() >= next) {
      agent.housekeeping();
      next = std::chrono::steady_clock::now() + cfg.poll_interval;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    agent.poll_correlation();
  }
  std::fputs("vigil-agent: stopping, detaching probes\n", stderr);
  return 0;
}

}  // namespace vigil::agent
