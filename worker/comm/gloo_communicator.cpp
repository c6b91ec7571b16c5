// Gloo over TCP. Gloo reports a timeout as an IoException "Timed out waiting N ms for ..."; that
// text is the only way to tell it from a broken connection, so it is matched here, once.
#include "comm/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <cstring>

namespace vigil {
namespace {

// Runs one Gloo collective, translating its exceptions into CollectiveError.
template <typename F>
void gloo_call(CollectiveOp op, F&& f) {
  try {
    f();
  } catch (const gloo::IoException& e) {
    const bool timed_out = std::strstr(e.what(), "Timed out") != nullptr;
    throw CollectiveError(op, timed_out ? CollectiveStatus::kTimeout : CollectiveStatus::kError, e.what());
  } catch (const gloo::Exception& e) {
    throw CollectiveError(op, CollectiveStatus::kError, e.what());
  }
}

}  // namespace

GlooCommunicator::GlooCommunicator(const GlooOptions& o) : rank_(o.rank), world_(o.world) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world)
    throw std::invalid_argument("gloo: rank " + std::to_string(o.rank) + " outside a world of " + std::to_string(o.world));
  if (o.store_dir.empty()) throw std::invalid_argument("gloo: a rendezvous directory is required");
  try {
    gloo::transport::tcp::attr attr;
    if (!o.iface.empty()) attr.iface = o.iface;
    else if (!o.host.empty()) attr.hostname = o.host;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore files(o.store_dir);
    gloo::rendezvous::PrefixStore store(o.prefix, files);
    auto context = std::make_shared<gloo::rendezvous::Context>(o.rank, o.world);
    context->setTimeout(o.connect_timeout);
    context->connectFullMesh(store, device);
    context_ = std::move(context);
  } catch (const std::exception& e) {
    throw std::runtime_error("gloo: rank " + std::to_string(o.rank) + " of " + std::to_string(o.world) +
                             " could not join through " + o.store_dir + ": " + e.what());
  }
}

GlooCommunicator::~GlooCommunicator() = default;

void GlooCommunicator::do_all_gather(const float* in, size_t count, float* out, std::chrono::milliseconds timeout) {
  gloo_call(CollectiveOp::kAllGather, [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<float*>(in), count);  // Gloo only reads the input
    opts.setOutput(out, count * static_cast<size_t>(world_));
    opts.setTimeout(timeout);
    gloo::allgather(opts);
  });
}

void GlooCommunicator::do_all_reduce_sum(float* data, size_t count, std::chrono::milliseconds timeout) {
  gloo_call(CollectiveOp::kAllReduce, [&] {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, count);
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTimeout(timeout);
    gloo::allreduce(opts);
  });
}

void GlooCommunicator::do_broadcast(void* data, size_t bytes, int root, std::chrono::milliseconds timeout) {
  gloo_call(CollectiveOp::kBroadcast, [&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(data), bytes);
    opts.setRoot(root);
    opts.setTimeout(timeout);
    gloo::broadcast(opts);
  });
}

void GlooCommunicator::do_barrier(std::chrono::milliseconds timeout) {
  gloo_call(CollectiveOp::kBarrier, [&] {
    gloo::BarrierOptions opts(context_);
    opts.setTimeout(timeout);
    gloo::barrier(opts);
  });
}

}  // namespace vigil
