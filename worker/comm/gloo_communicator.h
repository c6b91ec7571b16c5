// Gloo backend (TCP transport) of the Communicator: CPU tensor parallelism between processes.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace gloo {
class Context;
}

namespace vigil {

struct GlooOptions {
  int rank = 0;
  int world = 1;
  // Rendezvous: a directory every rank can read and write (shared volume, or the same host). Each
  // rank writes its listening address there under `prefix` and reads the others'. Keys are never
  // removed, so a stale directory from a previous job misroutes connections: use a fresh one per
  // launch (or a fresh prefix).
  std::string store_dir;
  std::string prefix = "vigil-tp";
  // Where this rank listens: an interface name (e.g. "eth0"), else a host name or address; both
  // empty: the host name's address.
  std::string iface;
  std::string host;
  std::chrono::milliseconds connect_timeout{60000};  // waiting for the other ranks to appear
};

class GlooCommunicator final : public Communicator {
 public:
  // Connects to every other rank (full mesh) or throws std::runtime_error naming what failed.
  explicit GlooCommunicator(const GlooOptions& options);
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string_view backend() const override { return "gloo"; }

 protected:
  void do_all_gather(const float* in, size_t count, float* out, std::chrono::milliseconds timeout) override;
  void do_all_reduce_sum(float* data, size_t count, std::chrono::milliseconds timeout) override;
  void do_broadcast(void* data, size_t bytes, int root, std::chrono::milliseconds timeout) override;
  void do_barrier(std::chrono::milliseconds timeout) override;

 private:
  int rank_, world_;
  std::shared_ptr<gloo::Context> context_;
};

}  // namespace vigil
