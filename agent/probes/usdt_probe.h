// Loads usdt.bpf.c and attaches the caching-allocator USDT probes (PyTorch's pytorch:*, the
// worker's vigil:*) in each distinct binary or library the agent finds them in.
#pragma once

#include <sys/types.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "probes/bpf_util.h"
#include "stats/agent_stats.h"

struct usdt_bpf;

namespace vigil::agent {

class UsdtProbe {
 public:
  // `off`: probes not to attach, as "PROVIDER:NAME" (names()).
  UsdtProbe(const std::string& btf_path, AgentStats& stats, std::set<std::string> off = {});  // throws std::runtime_error
  // The USDT probes it attaches, as probes.disable names them.
  static std::vector<std::string> names();
  ~UsdtProbe();
  UsdtProbe(const UsdtProbe&) = delete;
  UsdtProbe& operator=(const UsdtProbe&) = delete;

  // Attaches every known probe found in the file (once per device + inode); returns links made.
  int attach(const std::string& path, dev_t dev, ino_t inode, const std::string& name);
  int attach(const std::string& path);

  int allocators_fd() const;
  int blocks_fd() const;

 private:
  struct SkelDeleter {
    void operator()(usdt_bpf* s) const;
  };
  AgentStats& stats_;
  std::unique_ptr<usdt_bpf, SkelDeleter> skel_;
  std::set<std::pair<dev_t, ino_t>> done_;
  std::set<std::string> off_;  // "PROVIDER:NAME" not attached
  std::vector<Link> links_;
};

}  // namespace vigil::agent
