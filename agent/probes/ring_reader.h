// Drains every BPF ring buffer of the agent from one dedicated thread, independent of the
// housekeeping loop (a /proc scan on a busy node can take seconds; a process-event ring fills in
// well under that during an exec storm).
//
// All rings sit in one libbpf `ring_buffer` manager (`ring_buffer__add`); the thread blocks in
// epoll_wait on the manager's epoll fd (`ring_buffer__epoll_fd`) and an eventfd used to stop it,
// and on wake-up consumes every ring. Sample callbacks therefore run on that thread: whatever
// they touch must be safe against the housekeeping loop and the HTTP thread (see agent.cpp).
#pragma once

#include <bpf/libbpf.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace vigil::agent {

class RingReader {
 public:
  RingReader();  // throws std::runtime_error (eventfd, epoll)
  ~RingReader();  // stops the thread, then frees the rings: no callback runs after it
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  // Adds the BPF_MAP_TYPE_RINGBUF map `map_fd` of probe set `set`; `fn(ctx, data, size)` gets
  // each record. Only before start(). Throws std::runtime_error.
  void add(const std::string& set, int map_fd, ring_buffer_sample_fn fn, void* ctx);
  // Starts the draining thread (no-op without rings).
  void start();
  // Stops and joins the thread (idempotent). Records still queued stay in the kernel.
  void stop();
  // Hands every queued record to its callback on the calling thread, without waiting; for
  // tests and for use without start(). Returns the number of records or a negative errno.
  int consume();

  bool running() const { return thread_.joinable(); }

 private:
  void run();
  ring_buffer* rb_ = nullptr;
  int stop_fd_ = -1;   // eventfd: written once by stop()
  int epoll_fd_ = -1;  // the manager's epoll fd + stop_fd_
  std::thread thread_;
};

}  // namespace vigil::agent
