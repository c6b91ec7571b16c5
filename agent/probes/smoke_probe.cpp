// Toolchain self-test: load the smoke skeleton, attach to a tracepoint, see one event, detach.
#include "probes/smoke_probe.h"

#include <linux/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "smoke_events.h"
#include "smoke.skel.h"

namespace vigil::agent {
namespace {

struct SkeletonDeleter {
  void operator()(smoke_bpf* skel) const { smoke_bpf__destroy(skel); }
};
using SmokeSkeleton = std::unique_ptr<smoke_bpf, SkeletonDeleter>;

struct RingBufferDeleter {
  void operator()(ring_buffer* rb) const { ring_buffer__free(rb); }
};
using RingBuffer = std::unique_ptr<ring_buffer, RingBufferDeleter>;

struct Seen {
  unsigned events = 0;
  smoke_event last{};
};

int on_event(void* ctx, void* data, size_t size) {
  auto* seen = static_cast<Seen*>(ctx);
  if (size < sizeof(smoke_event)) return 0;
  std::memcpy(&seen->last, data, sizeof(smoke_event));
  ++seen->events;
  return 0;
}

std::string errno_text(const char* what, int err) {
  return std::string(what) + ": " + std::strerror(err < 0 ? -err : err);
}

}  // namespace

SelfTestResult run_bpf_self_test() {
  SmokeSkeleton skel(smoke_bpf__open());
  if (!skel) return {false, errno_text("open smoke skeleton", errno)};
  skel->rodata->target_tgid = static_cast<__u32>(getpid());
  if (int err = smoke_bpf__load(skel.get())) return {false, errno_text("load smoke program", err)};
  if (int err = smoke_bpf__attach(skel.get()))
    return {false, errno_text("attach tracepoint syscalls/sys_enter_getppid", err)};

  Seen seen;
  RingBuffer rb(ring_buffer__new(bpf_map__fd(skel->maps.events), on_event, &seen, nullptr));
  if (!rb) return {false, errno_text("create ring buffer", errno)};

  (void)getppid();
  for (int tries = 0; tries < 10 && seen.events == 0; ++tries) {
    int n = ring_buffer__poll(rb.get(), 100);
    if (n < 0 && n != -EINTR) return {false, errno_text("poll ring buffer", n)};
  }
  if (seen.events != 1)
    return {false, "expected 1 getppid event from pid " + std::to_string(getpid()) + ", saw " +
                       std::to_string(seen.events)};
  if (seen.last.pid != static_cast<__u32>(getpid()))
    return {false, "event carried pid " + std::to_string(seen.last.pid)};
  return {true, "loaded, attached, saw 1 event from pid " + std::to_string(seen.last.pid) +
                    ", detached"};
}

}  // namespace vigil::agent
