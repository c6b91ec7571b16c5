// Reads the kernel log (/dev/kmsg) on its own thread and hands each record to a sink. Where it
// stopped is kept in a BPF array map pinned in the set's directory (bpffs, like the other sets'
// state): an agent restarted on the same boot resumes after the last settled record, so it counts
// no line twice and misses none the kernel still holds; a reboot clears bpffs and the kernel's
// sequence numbers alike. Without a saved position it starts at the oldest record the kernel keeps.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "probes/xid_ledger.h"

namespace vigil::agent {

class KmsgReader {
 public:
  // Opens PATH (/dev/kmsg; a test may give a FIFO of records in the same format) and starts
  // reading. PIN_DIR "" keeps no position. Throws std::runtime_error when PATH cannot be opened.
  KmsgReader(const std::string& path, const std::string& pin_dir, KmsgSink& sink);
  ~KmsgReader();  // stops the thread and saves the position
  KmsgReader(const KmsgReader&) = delete;
  KmsgReader& operator=(const KmsgReader&) = delete;

  const std::string& path() const { return path_; }
  // Where it started: the saved position, or 0 (the oldest record the kernel keeps).
  uint64_t start_seq() const { return start_seq_; }
  // The first sequence number a restarted agent would read (saved position).
  uint64_t next_seq() const { return next_seq_.load(); }

 private:
  void run();
  void handle(std::string_view record);
  void update_position();
  void save_position();

  const std::string path_;
  KmsgSink& sink_;
  int fd_ = -1;
  int stop_fd_ = -1;  // eventfd
  int seq_fd_ = -1;   // the pinned position, or -1
  bool seen_any_ = false;
  uint64_t start_seq_ = 0;
  uint64_t expected_seq_ = 0;        // the record that should come next
  std::atomic<uint64_t> next_seq_{0};  // every record before it is settled
  std::string partial_;              // a FIFO may split records across reads
  std::thread thread_;
};

}  // namespace vigil::agent
