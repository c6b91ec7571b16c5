// The owner of the XID counts on the user side. XIDs come from two sources: the kernel log's
// "NVRM: Xid" lines (every driver) and the open module's nvidia:nvidia_dev_xid tracepoint. The
// driver reports each XID to both (nvErrorLog2() in src/nvidia/src/kernel/os/os_init.c prints the
// line in krcReportXid(), then fires the tracepoint in osErrorLogV()), so while the tracepoint is
// attached each report waits up to `pair_window` for its twin from the other source and the pair
// counts once, with the process the line names. A report whose twin never comes (a full ring, a
// driver with logging off) counts alone when the window ends: nothing is lost, nothing doubled.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "probes/kmsg_record.h"
#include "probes/xid_log_line.h"

namespace vigil::agent {

struct XidSeries {
  std::string gpu;      // "0000:cb:00.0"
  uint32_t code = 0;
  std::string process;  // "" when no source named one
  auto operator<=>(const XidSeries&) const = default;
};

struct XidSnapshot {
  std::vector<std::pair<XidSeries, uint64_t>> counts;
  uint64_t log_lines = 0;       // XID lines of the kernel (facility 0) read from the log
  uint64_t forged_lines = 0;    // XID-looking lines a process wrote to /dev/kmsg: never counted
  uint64_t series_dropped = 0;  // XIDs counted under process="" because kMaxSeries was reached
  uint64_t records_lost = 0;    // kernel log records overwritten before the agent read them
};

// What a kernel log reader hands its records to (kmsg_reader.h).
class KmsgSink {
 public:
  virtual ~KmsgSink() = default;
  // A record of any facility. Returns true when it is settled: counted or not an XID (the reader
  // may then save its sequence number); false while it waits.
  virtual bool on_log_record(const KmsgRecord& record) = 0;
  // Records the kernel overwrote before they were read (a gap in the sequence numbers).
  virtual void on_records_lost(uint64_t n) = 0;
  // The sequence number of the oldest record still waiting, if any: the reader saves no later one.
  virtual std::optional<uint64_t> oldest_waiting() = 0;
};

// What the XID collector reads: the ledger, or a snapshot a unit test made.
class XidReader {
 public:
  virtual ~XidReader() = default;
  virtual XidSnapshot read() const = 0;
};

class XidLedger : public XidReader, public KmsgSink {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxSeries = 1024;  // distinct (gpu, code, process); then process=""
  static constexpr size_t kMaxPending = 4096; // reports waiting for a twin; then counted alone

  explicit XidLedger(std::chrono::milliseconds pair_window = std::chrono::seconds(1)) : window_(pair_window) {}

  // Whether the tracepoint is attached: without it, log lines count at once.
  void set_tracepoint(bool attached);
  bool on_log_record(const KmsgRecord& record) override { return on_log_record(record, Clock::now()); }
  bool on_log_record(const KmsgRecord& record, Clock::time_point now);
  void on_records_lost(uint64_t n) override;
  std::optional<uint64_t> oldest_waiting() override;
  // An event of the tracepoint.
  void on_tracepoint(const std::string& gpu, uint32_t code, const std::string& msg,
                     Clock::time_point now = Clock::now());
  // Counts the reports whose window has ended (called every 50 ms).
  void settle(Clock::time_point now = Clock::now());

  XidSnapshot read() const override;

 private:
  struct Pending {
    std::string gpu;
    uint32_t code = 0;
    std::string process;
    std::string msg;
    uint64_t seq = 0;  // log records only
    Clock::time_point at;
  };
  void count(const std::string& gpu, uint32_t code, const std::string& process);
  static bool same_report(const Pending& a, const std::string& gpu, uint32_t code, const std::string& msg);

  const std::chrono::milliseconds window_;
  mutable std::mutex mu_;
  bool tracepoint_ = false;
  std::deque<Pending> waiting_lines_;   // log lines waiting for their tracepoint event
  std::deque<Pending> waiting_events_;  // tracepoint events waiting for their log line
  std::map<XidSeries, uint64_t> counts_;
  uint64_t log_lines_ = 0;
  uint64_t forged_lines_ = 0;
  uint64_t series_dropped_ = 0;
  uint64_t records_lost_ = 0;
};

}  // namespace vigil::agent
