// The TCP set: tcp.bpf.c's tracepoints, exported per process and peer (tcp_*).
#pragma once

#include <memory>
#include <vector>

#include "collectors/tcp_collector.h"
#include "probes/tcp_maps.h"
#include "probes/tcp_probe.h"
#include "sets/probe_set.h"

namespace vigil::agent {

class TcpSet : public ProbeSet {
 public:
  explicit TcpSet(SetContext& ctx);
  std::vector<NamedCollector> collectors() override;
  void expire() override;

  const TcpConnectionReader& connections() const { return connections_; }  // for correlation

 private:
  ProcessTable& processes_;
  TcpProbe probe_;
  TcpMaps maps_;  // the owner of probe_'s per-process maps
  TcpConnections connections_;
  std::shared_ptr<TcpCollector> collector_;
};

}  // namespace vigil::agent
