// One thread blocked in epoll drains every ring buffer (libbpf-tools' pattern, with an eventfd
// instead of a poll timeout so that stopping is immediate and an idle agent never wakes up).
#include "probes/ring_reader.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>

#include "probes/bpf_util.h"

namespace vigil::agent {

namespace {
constexpr uint64_t kRingsReady = 1;
constexpr uint64_t kStop = 2;
}  // namespace

RingReader::RingReader() {
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) throw std::runtime_error("ring reader eventfd: " + errno_reason(errno));
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) {
    int err = errno;
    close(stop_fd_);
    throw std::runtime_error("ring reader epoll: " + errno_reason(err));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kStop;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &ev);
}

RingReader::~RingReader() {
  stop();
  if (rb_) ring_buffer__free(rb_);
  close(epoll_fd_);
  close(stop_fd_);
}

void RingReader::add(const std::string& set, int map_fd, ring_buffer_sample_fn fn, void* ctx) {
  if (running()) throw std::logic_error("RingReader::add after start");
  if (!rb_) {
    rb_ = ring_buffer__new(map_fd, fn, ctx, nullptr);
    if (!rb_) throw std::runtime_error(set + " ring buffer: " + errno_reason(errno));
    // The manager's own epoll fd is readable while any of its rings has data.
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kRingsReady;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ring_buffer__epoll_fd(rb_), &ev) != 0)
      throw std::runtime_error(set + " ring buffer epoll: " + errno_reason(errno));
  } else if (int err = ring_buffer__add(rb_, map_fd, fn, ctx); err != 0) {
    throw std::runtime_error(set + " ring buffer: " + errno_reason(-err));
  }
}

void RingReader::start() {
  if (rb_ && !running()) thread_ = std::thread([this] { run(); });
}

void RingReader::stop() {
  if (!running()) return;
  uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof one) != sizeof one)
    std::fprintf(stderr, "vigil-agent: ring reader: cannot signal stop: %s\n", errno_reason(errno).c_str());
  thread_.join();
}

int RingReader::consume() {
  if (!rb_) return 0;
  return ring_buffer__consume(rb_);
}

void RingReader::run() {
  for (;;) {
    epoll_event events[2];
    int n = epoll_wait(epoll_fd_, events, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "vigil-agent: ring reader: epoll_wait: %s\n", errno_reason(errno).c_str());
      return;
    }
    bool stop = false;
    for (int i = 0; i < n; ++i) stop |= events[i].data.u64 == kStop;
    if (stop) return;
    // Consumes every ring of the manager, not only the one that woke us: one pass, no starvation.
    int got = ring_buffer__consume(rb_);
    if (got < 0 && got != -EINTR)
      std::fprintf(stderr, "vigil-agent: ring buffer: %s\n", errno_reason(-got).c_str());
  }
}

}  // namespace vigil::agent
