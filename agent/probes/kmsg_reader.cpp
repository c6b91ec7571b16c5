// The kernel log reader; see kmsg_reader.h. /dev/kmsg returns one whole record per read(),
// -EPIPE when records were overwritten since the last read (the next read returns the oldest one
// left), -EAGAIN when non-blocking and nothing is new (Documentation/ABI/testing/dev-kmsg).
#include "probes/kmsg_reader.h"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace vigil::agent {
namespace {

constexpr const char* kSeqPin = "kmsg_next_seq";

// The pinned position: an existing pin of the right shape, or a new one; -1 (said) otherwise.
int open_position(const std::string& pin_dir) {
  if (pin_dir.empty()) return -1;
  const std::string path = pin_dir + "/" + kSeqPin;
  int fd = bpf_obj_get(path.c_str());
  if (fd >= 0) {
    bpf_map_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.type == BPF_MAP_TYPE_ARRAY && info.key_size == 4 &&
        info.value_size == 8 && info.max_entries == 1)
      return fd;
    close(fd);
    std::fprintf(stderr, "vigil-agent: xid: %s is not a kernel log position; starting from the oldest record\n",
                 path.c_str());
    return -1;
  }
  fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, kSeqPin, 4, 8, 1, nullptr);
  if (fd < 0 || bpf_obj_pin(fd, path.c_str()) != 0) {
    std::fprintf(stderr, "vigil-agent: xid: cannot pin %s (%s); a restart will read the kernel log from its start\n",
                 path.c_str(), std::strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

KmsgReader::KmsgReader(const std::string& path, const std::string& pin_dir, KmsgSink& sink)
    : path_(path), sink_(sink) {
  fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error("open " + path + ": " + std::strerror(errno));
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    close(fd_);
    throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  }
  seq_fd_ = open_position(pin_dir);
  if (seq_fd_ >= 0) {
    const __u32 zero = 0;
    __u64 saved = 0;
    if (bpf_map_lookup_elem(seq_fd_, &zero, &saved) == 0 && saved > 0) {
      seen_any_ = true;
      start_seq_ = expected_seq_ = saved;
      next_seq_ = saved;
    }
  }
  thread_ = std::thread([this] { run(); });
}

KmsgReader::~KmsgReader() {
  const uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof one) < 0) std::perror("vigil-agent: xid: eventfd");
  thread_.join();
  update_position();
  if (seq_fd_ >= 0) close(seq_fd_);
  close(stop_fd_);
  close(fd_);
}

void KmsgReader::save_position() {
  if (seq_fd_ < 0) return;
  const __u32 zero = 0;
  const __u64 value = next_seq_.load();
  bpf_map_update_elem(seq_fd_, &zero, &value, BPF_ANY);
}

void KmsgReader::handle(std::string_view text) {
  auto record = parse_kmsg_record(text);
  if (!record) return;
  if (seen_any_ && record->seq < expected_seq_) return;  // read before a restart (or replayed)
  if (record->seq > expected_seq_) sink_.on_records_lost(record->seq - expected_seq_);
  seen_any_ = true;
  expected_seq_ = record->seq + 1;
  sink_.on_log_record(*record);
  update_position();
}

// Saved as soon as it moves (one bpf() call per record): killed between two records, the next
// agent neither counts the last one again nor skips the next.
void KmsgReader::update_position() {
  const uint64_t next = sink_.oldest_waiting().value_or(seen_any_ ? expected_seq_ : next_seq_.load());
  if (next == next_seq_.load()) return;
  next_seq_ = next;
  save_position();
}

void KmsgReader::run() {
  char buf[8192];  // a printk record is at most 1024 bytes of text plus its dictionary
  for (;;) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    // Asleep until the kernel logs something, but for a line waiting for its twin: its position
    // moves when the ledger settles it.
    if (poll(fds, 2, sink_.oldest_waiting() ? 100 : -1) < 0 && errno != EINTR) break;
    if (fds[1].revents) break;
    bool at_end = false;
    while (!at_end) {
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n > 0) {
        partial_.append(buf, static_cast<size_t>(n));
        size_t start = 0;
        for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
          if (partial_[start] != ' ') handle(std::string_view(partial_).substr(start, nl - start));  // " KEY=VALUE"
        partial_.erase(0, start);
        continue;
      }
      if (n < 0 && (errno == EPIPE || errno == EINTR)) continue;  // EPIPE: the gap shows in the next seq
      at_end = true;
      if (n == 0) {  // a FIFO without writers or a file at its end: nothing to wait on but time
        pollfd stop = {stop_fd_, POLLIN, 0};
        poll(&stop, 1, 100);
      } else if (errno != EAGAIN) {
        std::fprintf(stderr, "vigil-agent: xid: read %s: %s\n", path_.c_str(), std::strerror(errno));
        pollfd stop = {stop_fd_, POLLIN, 0};
        poll(&stop, 1, 1000);
      }
    }
    update_position();  // waiting lines the ledger settled meanwhile
  }
}

}  // namespace vigil::agent
