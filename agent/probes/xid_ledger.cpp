// Counts XIDs from the kernel log and the tracepoint, each report once; see xid_ledger.h.
#include "probes/xid_ledger.h"

#include <algorithm>

namespace vigil::agent {

void XidLedger::set_tracepoint(bool attached) {
  std::lock_guard lock(mu_);
  tracepoint_ = attached;
}

void XidLedger::count(const std::string& gpu, uint32_t code, const std::string& process) {
  XidSeries series{gpu, code, process};
  auto it = counts_.find(series);
  if (it == counts_.end() && counts_.size() >= kMaxSeries && !process.empty()) {
    ++series_dropped_;
    series.process.clear();
    it = counts_.find(series);
  }
  if (it != counts_.end()) {
    ++it->second;
    return;
  }
  counts_.emplace(std::move(series), 1);  // a new process="" series may pass the cap: one per GPU and code
}

// The tracepoint's msg is the line's text up to a root-cause suffix the line may add; the BPF
// program keeps XID_MSG_LEN - 1 bytes of it, the log about 1000: compare what both have.
bool XidLedger::same_report(const Pending& a, const std::string& gpu, uint32_t code, const std::string& msg) {
  if (a.gpu != gpu || a.code != code) return false;
  const size_t n = std::min(a.msg.size(), msg.size());
  return a.msg.compare(0, n, msg, 0, n) == 0;
}

bool XidLedger::on_log_record(const KmsgRecord& record, Clock::time_point now) {
  if (!looks_like_xid_line(record.message)) return true;
  std::lock_guard lock(mu_);
  if (record.facility != kKernelFacility) {
    ++forged_lines_;
    return true;
  }
  auto line = parse_xid_log_line(record.message);
  if (!line) return true;
  ++log_lines_;
  if (!tracepoint_) {
    count(line->gpu, line->code, line->process);
    return true;
  }
  auto twin = std::find_if(waiting_events_.begin(), waiting_events_.end(), [&](const Pending& p) {
    return same_report(p, line->gpu, line->code, line->message);
  });
  if (twin != waiting_events_.end()) {
    waiting_events_.erase(twin);
    count(line->gpu, line->code, line->process);
    return true;
  }
  if (waiting_lines_.size() >= kMaxPending) {
    count(line->gpu, line->code, line->process);
    return true;
  }
  waiting_lines_.push_back({line->gpu, line->code, line->process, line->message, record.seq, now});
  return false;
}

void XidLedger::on_tracepoint(const std::string& gpu, uint32_t code, const std::string& msg, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto twin = std::find_if(waiting_lines_.begin(), waiting_lines_.end(),
                           [&](const Pending& p) { return same_report(p, gpu, code, msg); });
  if (twin != waiting_lines_.end()) {
    count(twin->gpu, twin->code, twin->process);
    waiting_lines_.erase(twin);
    return;
  }
  if (waiting_events_.size() >= kMaxPending) {
    count(gpu, code, "");
    return;
  }
  waiting_events_.push_back({gpu, code, "", msg, 0, now});
}

void XidLedger::settle(Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto expire = [&](std::deque<Pending>& q) {
    while (!q.empty() && now - q.front().at >= window_) {
      count(q.front().gpu, q.front().code, q.front().process);
      q.pop_front();
    }
  };
  expire(waiting_lines_);
  expire(waiting_events_);
}

void XidLedger::on_records_lost(uint64_t n) {
  std::lock_guard lock(mu_);
  records_lost_ += n;
}

std::optional<uint64_t> XidLedger::oldest_waiting() {
  std::lock_guard lock(mu_);
  if (waiting_lines_.empty()) return std::nullopt;
  uint64_t oldest = waiting_lines_.front().seq;
  for (const Pending& p : waiting_lines_) oldest = std::min(oldest, p.seq);
  return oldest;
}

XidSnapshot XidLedger::read() const {
  std::lock_guard lock(mu_);
  XidSnapshot s;
  s.counts.reserve(counts_.size());
  for (const auto& [series, n] : counts_) s.counts.emplace_back(series, n);
  s.log_lines = log_lines_;
  s.forged_lines = forged_lines_;
  s.series_dropped = series_dropped_;
  s.records_lost = records_lost_;
  return s;
}

}  // namespace vigil::agent
