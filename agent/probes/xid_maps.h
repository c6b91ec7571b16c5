// The owner of xid.bpf.c's counters on the user side: reads them into a snapshot for the XID
// collector. Node-wide (by GPU and code), so nothing is forgotten when a process exits.
#pragma once

#include <linux/types.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "xid_events.h"

namespace vigil::agent {

struct XidSnapshot {
  std::vector<std::pair<xid_key, uint64_t>> counts;  // (GPU, XID code) -> occurrences
};

// What the XID collector reads: the map, or a snapshot a unit test made.
class XidReader {
 public:
  virtual ~XidReader() = default;
  virtual XidSnapshot read() const = 0;
};

class XidMaps : public XidReader {
 public:
  explicit XidMaps(int xids_fd) : xids_fd_(xids_fd) {}
  XidSnapshot read() const override;

 private:
  int xids_fd_;
};

}  // namespace vigil::agent
