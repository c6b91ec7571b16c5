// CUDA Graph collector: failures of launch, instantiate, capture and exec-update by error name,
// allocations attempted inside a stream capture (what usually invalidates it), and the calls and
// errors of every probed driver entry point.
#include "collectors/cuda_graph_collector.h"

#include <map>

#include "collectors/metric_builder.h"
#include "collectors/process_labels.h"
#include "probes/bpf_util.h"
#include "probes/cuda_result.h"

namespace vigil::agent {

using prometheus::MetricType;

std::vector<prometheus::MetricFamily> CudaGraphCollector::Collect() const {
  const CudaSnapshot snapshot = maps_.read();
  const auto& procs = snapshot.procs;
  const auto& errors = snapshot.errors;

  auto launch = make_family("cuda_graph_launch_failures_total", "cuGraphLaunch calls that failed, by error.", MetricType::Counter);
  auto inst = make_family("cuda_graph_instantiate_failures_total", "cuGraphInstantiate* calls that failed, by error.", MetricType::Counter);
  auto capture = make_family("cuda_stream_capture_failures_total",
                             "cuStreamBeginCapture/cuStreamEndCapture calls that failed, by error.", MetricType::Counter);
  auto update = make_family("cuda_graph_exec_update_failures_total", "cuGraphExecUpdate calls that failed, by error.", MetricType::Counter);
  auto launches = make_family("cuda_graph_launches_total", "cuGraphLaunch calls.", MetricType::Counter);
  auto in_capture = make_family("cuda_stream_capture_allocations_total",
                                "Allocation calls made while a stream capture was open.", MetricType::Counter);
  auto open = make_family("cuda_stream_captures_open", "Stream captures begun and not yet ended.", MetricType::Gauge);
  auto calls = make_family("cuda_driver_calls_total", "Calls of probed CUDA driver entry points.", MetricType::Counter);
  auto errs = make_family("cuda_driver_errors_total", "Failed calls of probed CUDA driver entry points, by error.", MetricType::Counter);

  std::map<uint32_t, LabelList> labels;
  for (const auto& [pid, p] : procs) {
    LabelList l = process_labels(processes_, pid, bpf_string(p.comm));
    labels[pid] = l;
    add_sample(launches, l, static_cast<double>(p.calls[CUDA_FN_GRAPH_LAUNCH]));
    add_sample(in_capture, l, static_cast<double>(p.allocs_in_capture));
    add_sample(open, l, static_cast<double>(p.open_captures));
    for (unsigned fn = 0; fn < CUDA_FN_MAX; ++fn) {
      if (!p.calls[fn]) continue;
      LabelList c = l;
      c.emplace_back("function", cuda_fn_name(fn));
      add_sample(calls, c, static_cast<double>(p.calls[fn]));
    }
  }
  for (const auto& [k, n] : errors) {
    auto it = labels.find(k.tgid);
    if (it == labels.end()) continue;
    LabelList l = it->second;
    l.emplace_back("error", cuda_result_name(k.result));
    prometheus::MetricFamily* f = nullptr;
    switch (k.fn) {
      case CUDA_FN_GRAPH_LAUNCH: f = &launch; break;
      case CUDA_FN_GRAPH_INSTANTIATE: f = &inst; break;
      case CUDA_FN_GRAPH_EXEC_UPDATE: f = &update; break;
      default: break;
    }
    if (f) add_sample(*f, l, static_cast<double>(n));
    LabelList e = l;
    e.emplace_back("function", cuda_fn_name(k.fn));
    add_sample(errs, e, static_cast<double>(n));
  }
  // Capture failures of begin and end are summed per (pid, error).
  std::map<std::pair<uint32_t, std::string>, uint64_t> cap;
  for (const auto& [k, n] : errors)
    if ((k.fn == CUDA_FN_STREAM_BEGIN_CAPTURE || k.fn == CUDA_FN_STREAM_END_CAPTURE) && labels.count(k.tgid))
      cap[{k.tgid, cuda_result_name(k.result)}] += n;
  for (const auto& [key, n] : cap) {
    LabelList l = labels[key.first];
    l.emplace_back("error", key.second);
    add_sample(capture, l, static_cast<double>(n));
  }
  return {launch, inst, capture, update, launches, in_capture, open, calls, errs};
}

}  // namespace vigil::agent
