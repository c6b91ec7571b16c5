// The TCP set: tcp.bpf.c's tracepoints, exported per process and peer (tcp_*).
#pragma once

#include <memory>
#include <vector>

#include "collectors/tcp_collector.h"
#include "probes/tcp_probe.h"
#include "sets/probe_set.h"

namespace vigil::agent {

class TcpSet : public ProbeSet {
 public:
  explicit TcpSet(SetContext& ctx);
  std::vector<NamedCollector> collectors() override;
  void expire() override;

  int conns_fd() const { return probe_.conns_fd(); }  // both ends of connections, for correlation

 private:
  TcpProbe probe_;
  std::shared_ptr<TcpCollector> collector_;
};

}  // namespace vigil::agent
