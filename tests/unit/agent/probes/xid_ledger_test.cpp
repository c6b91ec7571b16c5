// The ledger counts each XID once, whichever source reports it first, and never a line a process
// wrote; hand-made records and events, explicit clock.
#include "probes/xid_ledger.h"

#include <gtest/gtest.h>

#include <string>

namespace vigil::agent {
namespace {

using Clock = XidLedger::Clock;
using std::chrono::milliseconds;

KmsgRecord record(uint64_t seq, const std::string& text, uint32_t facility = kKernelFacility) {
  KmsgRecord r;
  r.seq = seq;
  r.facility = facility;
  r.message = text;
  return r;
}

uint64_t count(const XidLedger& ledger, const std::string& gpu, uint32_t code, const std::string& process) {
  for (const auto& [series, n] : ledger.read().counts)
    if (series == XidSeries{gpu, code, process}) return n;
  return 0;
}

uint64_t total(const XidLedger& ledger) {
  uint64_t n = 0;
  for (const auto& [series, c] : ledger.read().counts) n += c;
  return n;
}

const std::string kLine = "NVRM: Xid (PCI:0000:cb:00): 79, pid=42, name=python3, GPU has fallen off the bus.";
const std::string kGpu = "0000:cb:00.0";

TEST(XidLedger, WithoutTheTracepointALineCountsAtOnce) {
  XidLedger ledger;
  const auto t = Clock::now();
  EXPECT_TRUE(ledger.on_log_record(record(1, kLine), t));
  EXPECT_EQ(count(ledger, kGpu, 79, "python3"), 1u);
  EXPECT_FALSE(ledger.oldest_waiting());
  EXPECT_EQ(ledger.read().log_lines, 1u);
}

TEST(XidLedger, AForgedLineNeverCounts) {
  XidLedger ledger;
  EXPECT_TRUE(ledger.on_log_record(record(1, kLine, /*LOG_USER*/ 1), Clock::now()));
  EXPECT_EQ(total(ledger), 0u);
  EXPECT_EQ(ledger.read().forged_lines, 1u);
  EXPECT_EQ(ledger.read().log_lines, 0u);
}

TEST(XidLedger, OtherLinesAreSettledAndIgnored) {
  XidLedger ledger;
  ledger.set_tracepoint(true);
  EXPECT_TRUE(ledger.on_log_record(record(1, "usb 1-1: new high-speed USB device"), Clock::now()));
  EXPECT_TRUE(ledger.on_log_record(record(2, "usb: NVRM: Xid (nonsense"), Clock::now()));
  EXPECT_EQ(total(ledger), 0u);
  EXPECT_FALSE(ledger.oldest_waiting());
}

TEST(XidLedger, LineThenEventCountOnceWithTheLinesProcess) {
  XidLedger ledger(milliseconds(1000));
  ledger.set_tracepoint(true);
  const auto t = Clock::now();
  EXPECT_FALSE(ledger.on_log_record(record(5, kLine), t));
  EXPECT_EQ(ledger.oldest_waiting(), 5u);
  EXPECT_EQ(total(ledger), 0u);
  ledger.on_tracepoint(kGpu, 79, "GPU has fallen off the bus.", t + milliseconds(3));
  EXPECT_EQ(count(ledger, kGpu, 79, "python3"), 1u);
  EXPECT_FALSE(ledger.oldest_waiting());
  ledger.settle(t + milliseconds(5000));
  EXPECT_EQ(total(ledger), 1u);
}

TEST(XidLedger, EventThenLineCountOnce) {
  XidLedger ledger(milliseconds(1000));
  ledger.set_tracepoint(true);
  const auto t = Clock::now();
  ledger.on_tracepoint(kGpu, 79, "GPU has fallen off the bus.", t);
  EXPECT_EQ(total(ledger), 0u);
  EXPECT_TRUE(ledger.on_log_record(record(5, kLine), t + milliseconds(10)));
  ledger.settle(t + milliseconds(5000));
  EXPECT_EQ(count(ledger, kGpu, 79, "python3"), 1u);
  EXPECT_EQ(total(ledger), 1u);
}

TEST(XidLedger, AReportWithoutItsTwinCountsWhenItsWindowEnds) {
  XidLedger ledger(milliseconds(1000));
  ledger.set_tracepoint(true);
  const auto t = Clock::now();
  EXPECT_FALSE(ledger.on_log_record(record(5, kLine), t));      // its event was dropped (full ring)
  ledger.on_tracepoint("0000:3b:00.0", 48, "DBE", t);              // a driver logging nothing
  ledger.settle(t + milliseconds(999));
  EXPECT_EQ(total(ledger), 0u);
  ledger.settle(t + milliseconds(1000));
  EXPECT_EQ(count(ledger, kGpu, 79, "python3"), 1u);
  EXPECT_EQ(count(ledger, "0000:3b:00.0", 48, ""), 1u);
  EXPECT_FALSE(ledger.oldest_waiting());
}

TEST(XidLedger, ABurstOfOneCodePairsByText) {
  // Three XID 13 reports of one GPU within a millisecond, each a different exception.
  XidLedger ledger(milliseconds(1000));
  ledger.set_tracepoint(true);
  const auto t = Clock::now();
  const std::string pre = "NVRM: Xid (PCI:0000:cb:00): 13, pid=7, name=";
  EXPECT_FALSE(ledger.on_log_record(record(1, pre + "a, Graphics SM Warp Exception"), t));
  EXPECT_FALSE(ledger.on_log_record(record(2, pre + "b, Graphics SM Global Exception"), t));
  EXPECT_FALSE(ledger.on_log_record(record(3, pre + "c, Graphics Exception: ESR 0x57c730"), t));
  ledger.on_tracepoint(kGpu, 13, "Graphics Exception: ESR 0x57c730", t);
  ledger.on_tracepoint(kGpu, 13, "Graphics SM Warp Exception", t);
  EXPECT_EQ(ledger.oldest_waiting(), 2u);
  ledger.on_tracepoint(kGpu, 13, "Graphics SM Global Exception", t);
  EXPECT_EQ(count(ledger, kGpu, 13, "a"), 1u);
  EXPECT_EQ(count(ledger, kGpu, 13, "b"), 1u);
  EXPECT_EQ(count(ledger, kGpu, 13, "c"), 1u);
  ledger.settle(t + milliseconds(5000));
  EXPECT_EQ(total(ledger), 3u);
}

TEST(XidLedger, TheTracepointsTruncatedTextStillPairs) {
  XidLedger ledger(milliseconds(1000));
  ledger.set_tracepoint(true);
  const auto t = Clock::now();
  const std::string msg(300, 'x');
  EXPECT_FALSE(ledger.on_log_record(record(1, "NVRM: Xid (PCI:0000:cb:00): 45, pid=7, name=p, " + msg + " caused by previous Xid 13"), t));
  ledger.on_tracepoint(kGpu, 45, msg.substr(0, 159), t);
  EXPECT_EQ(count(ledger, kGpu, 45, "p"), 1u);
}

TEST(XidLedger, SeriesAreBounded) {
  XidLedger ledger;
  const auto t = Clock::now();
  for (size_t i = 0; i < XidLedger::kMaxSeries + 50; ++i)
    ledger.on_log_record(record(i, "NVRM: Xid (PCI:0000:cb:00): 13, pid=1, name=p" + std::to_string(i) + ", x"), t);
  const XidSnapshot s = ledger.read();
  EXPECT_LE(s.counts.size(), XidLedger::kMaxSeries + 1);
  EXPECT_EQ(s.series_dropped, 50u);
  EXPECT_EQ(count(ledger, kGpu, 13, ""), 50u);
  EXPECT_EQ(total(ledger), XidLedger::kMaxSeries + 50);  // every XID counted
}

TEST(XidLedger, WaitingReportsAreBounded) {
  XidLedger ledger(milliseconds(1000));
  ledger.set_tracepoint(true);
  const auto t = Clock::now();
  for (size_t i = 0; i < XidLedger::kMaxPending + 10; ++i) ledger.on_log_record(record(i, kLine), t);
  EXPECT_EQ(total(ledger), 10u);  // past the bound, counted at once
  ledger.settle(t + milliseconds(1000));
  EXPECT_EQ(total(ledger), XidLedger::kMaxPending + 10);
}

}  // namespace
}  // namespace vigil::agent
