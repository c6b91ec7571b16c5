// Exports the agent's own health: probe sets enabled, probes attached, attach failures by reason,
// kernel-side events and ring buffer drops, what each BPF program costs (the kernel's own run-time
// statistics), how late the housekeeping loop runs, and how long each collector's last scrape took.
#include "collectors/self_collector.h"

#include "collectors/metric_builder.h"
#include "discovery/mapped_file.h"
#include "vigil/version.h"

namespace vigil::agent {

using prometheus::MetricType;

std::vector<prometheus::MetricFamily> SelfCollector::Collect() const {
  auto s = stats_.snapshot();
  auto info = make_family("vigil_agent_build_info", "Version of the running vigil-agent.", MetricType::Gauge);
  add_sample(info, {{"version", VIGIL_VERSION}}, 1);
  auto enabled = make_family("vigil_agent_probe_set_enabled",
                             "1 when a probe set is loaded; reason says why it is not.", MetricType::Gauge);
  for (const auto& [set, e] : s.enabled)
    add_sample(enabled, {{"set", set}, {"reason", e.second}}, e.first ? 1 : 0);
  auto attached = make_family("vigil_agent_probes_attached",
                              "BPF links currently attached, by probe set.", MetricType::Gauge);
  for (const auto& [set, n] : s.attached) add_sample(attached, {{"set", set}}, static_cast<double>(n));
  auto failures = make_family("vigil_agent_attach_failures_total",
                              "Probes that could not be attached, by set and reason.", MetricType::Counter);
  for (const auto& [key, n] : s.attach_failures)
    add_sample(failures, {{"set", key.first}, {"reason", key.second}}, static_cast<double>(n));
  auto refused = make_family("vigil_agent_discovery_refused_total",
                             "Mapped files and processes' maps discovery did not use (or used partially), "
                             "by reason: docs/probes-agent.md, what the agent trusts.",
                             MetricType::Counter);
  for (Refusal r : kCountedRefusals) {
    auto it = s.discovery_refused.find(refusal_name(r));
    add_sample(refused, {{"reason", refusal_name(r)}},
               static_cast<double>(it == s.discovery_refused.end() ? 0 : it->second));
  }
  auto events = make_family("vigil_agent_events_total",
                            "Probe hits handled in the kernel, by probe set.", MetricType::Counter);
  auto drops = make_family("vigil_agent_ringbuf_drops_total",
                           "Events lost because the ring buffer was full, by probe set.", MetricType::Counter);
  auto recursion = make_family("vigil_agent_recursion_misses_total",
                               "Probe hits the kernel skipped (the program already running on that CPU; for a classic "
                               "tracepoint, any BPF program or bpf(2) map copy on it), by probe set.",
                               MetricType::Counter);
  auto table_full = make_family("vigil_agent_table_full_total",
                                "Inserts a full BPF hash table refused, by probe set: what they would have recorded "
                                "is missing (vigil_agent_table_entries says which table is at its size).",
                                MetricType::Counter);
  auto run_seconds = make_family("vigil_agent_bpf_program_run_seconds_total",
                                  "Time the kernel spent running each BPF program, counted while BPF run-time "
                                  "statistics are on (vigil_agent_bpf_stats_enabled); uprobe and tracepoint time "
                                  "is spent in the thread that hit the probe.",
                                  MetricType::Counter);
  auto runs = make_family("vigil_agent_bpf_program_runs_total",
                          "Runs of each BPF program, counted while BPF run-time statistics are on.",
                          MetricType::Counter);
  auto program_misses = make_family("vigil_agent_bpf_program_recursion_misses_total",
                                    "Runs of each BPF program the kernel skipped (already running on that CPU; "
                                    "for a classic tracepoint, any BPF program or bpf(2) map copy on it): events lost.",
                                    MetricType::Counter);
  for (const auto& [set, k] : s.kernel) {
    add_sample(events, {{"set", set}}, static_cast<double>(k.events));
    add_sample(drops, {{"set", set}}, static_cast<double>(k.ringbuf_drops));
    add_sample(table_full, {{"set", set}}, static_cast<double>(k.table_full));
    uint64_t set_misses = 0;
    for (const ProgramCost& p : k.programs) {
      const LabelList labels{{"set", set}, {"program", p.program}};
      add_sample(run_seconds, labels, static_cast<double>(p.run_time_ns) * 1e-9);
      add_sample(runs, labels, static_cast<double>(p.runs));
      add_sample(program_misses, labels, static_cast<double>(p.recursion_misses));
      set_misses += p.recursion_misses;
    }
    add_sample(recursion, {{"set", set}}, static_cast<double>(set_misses));
  }
  auto stats_on = make_family("vigil_agent_bpf_stats_enabled",
                              "1 while the kernel counts BPF program run time (bpf_stats in the config).",
                              MetricType::Gauge);
  add_sample(stats_on, {}, s.bpf_stats_enabled ? 1 : 0);
  auto lag = make_family("vigil_agent_housekeeping_lag_seconds",
                         "How late the last housekeeping tick (process scans, attaching, expiry) started "
                         "against its schedule.",
                         MetricType::Gauge);
  add_sample(lag, {}, s.housekeeping.lag_seconds);
  auto tick = make_family("vigil_agent_housekeeping_duration_seconds",
                          "How long the last housekeeping tick ran.", MetricType::Gauge);
  add_sample(tick, {}, s.housekeeping.duration_seconds);
  auto ticks = make_family("vigil_agent_housekeeping_ticks_total", "Housekeeping ticks run.", MetricType::Counter);
  add_sample(ticks, {}, static_cast<double>(s.housekeeping.ticks));
  auto rb = make_family("vigil_agent_ringbuf_events_total",
                        "Events read from ring buffers by the agent, by probe set.", MetricType::Counter);
  for (const auto& [set, n] : s.ringbuf_events) add_sample(rb, {{"set", set}}, static_cast<double>(n));
  auto scrape = make_family("vigil_agent_collector_scrape_duration_seconds",
                            "Duration of the collector's previous scrape.", MetricType::Gauge);
  auto scrapes = make_family("vigil_agent_collector_scrapes_total",
                             "Scrapes served per collector.", MetricType::Counter);
  for (const auto& [name, v] : s.scrapes) {
    add_sample(scrape, {{"collector", name}}, v.second);
    add_sample(scrapes, {{"collector", name}}, static_cast<double>(v.first));
  }
  auto tables = make_family("vigil_agent_table_entries",
                            "Entries in the agent's per-process and per-socket tables (BPF maps, label cache).",
                            MetricType::Gauge);
  for (const auto& [key, n] : s.table_entries)
    add_sample(tables, {{"set", key.first}, {"table", key.second}}, static_cast<double>(n));
  return {info,   enabled, attached,    failures, refused,        events,   drops, table_full, recursion, run_seconds,
          runs,   program_misses, stats_on, lag,     tick,     ticks, rb,         scrape,    scrapes,     tables};
}

}  // namespace vigil::agent
