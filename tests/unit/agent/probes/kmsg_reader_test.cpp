// The kernel log reader (root: its position is pinned in bpffs). A FIFO of records in /dev/kmsg's
// format is the kernel log the test controls: a restarted reader resumes after the last record it
// settled, however much of the log the "kernel" hands it again, and a gap in the sequence numbers
// is counted as lost. Then the real /dev/kmsg: a line this process writes there arrives with the
// user facility, whatever it claims, and is never counted as an XID.
#include "probes/kmsg_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "probes/pinned_state.h"

namespace vigil::agent {
namespace {

namespace fs = std::filesystem;

bool wait_for(const std::function<bool()>& done) {
  for (int i = 0; i < 500; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

uint64_t total(const XidLedger& ledger) {
  uint64_t n = 0;
  for (const auto& [series, c] : ledger.read().counts) n += c;
  return n;
}

class KmsgReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "needs root for bpffs";
    const std::string id = std::to_string(getpid());
    dir_ = fs::temp_directory_path() / ("kmsg_reader_test." + id);
    fs::create_directories(dir_);
    fifo_ = (dir_ / "kmsg").string();
    ASSERT_EQ(mkfifo(fifo_.c_str(), 0600), 0);
    writer_ = open(fifo_.c_str(), O_RDWR | O_CLOEXEC);  // read-write: the FIFO never sees EOF
    ASSERT_GE(writer_, 0);
    pin_root_ = "/sys/fs/bpf/vigil-kmsg-reader-test-" + id;
    pin_dir_ = make_pin_dir(pin_root_, "xid");
  }
  void TearDown() override {
    if (writer_ >= 0) close(writer_);
    fs::remove_all(dir_);
    remove_pins(pin_root_);
  }
  // Records SEQ..SEQ+N-1 as the kernel would hand them out; XID lines at the seqs in XIDS.
  void emit(uint64_t first, uint64_t n, std::initializer_list<uint64_t> xids) {
    std::string out;
    for (uint64_t seq = first; seq < first + n; ++seq) {
      bool xid = std::find(xids.begin(), xids.end(), seq) != xids.end();
      out += "4," + std::to_string(seq) + ",1000,-;" +
             (xid ? "NVRM: Xid (PCI:0000:cb:00): 79, pid=9, name=r" + std::to_string(seq) + ", GPU has fallen off the bus."
                  : "some driver: line " + std::to_string(seq)) +
             "\n SUBSYSTEM=pci\n";
    }
    ASSERT_EQ(write(writer_, out.data(), out.size()), static_cast<ssize_t>(out.size()));
  }
  fs::path dir_;
  std::string fifo_, pin_root_, pin_dir_;
  int writer_ = -1;
};

TEST_F(KmsgReaderTest, ARestartResumesAfterTheLastSettledRecord) {
  {
    XidLedger ledger;
    KmsgReader reader(fifo_, pin_dir_, ledger);
    EXPECT_EQ(reader.start_seq(), 0u);
    emit(0, 5, {3});
    ASSERT_TRUE(wait_for([&] { return reader.next_seq() == 5; })) << reader.next_seq();
    EXPECT_EQ(total(ledger), 1u);
    EXPECT_EQ(ledger.read().records_lost, 0u);
  }
  XidLedger ledger;
  KmsgReader reader(fifo_, pin_dir_, ledger);
  EXPECT_EQ(reader.start_seq(), 5u);
  emit(0, 7, {3, 6});  // the kernel hands out its whole buffer again, with two new records
  ASSERT_TRUE(wait_for([&] { return reader.next_seq() == 7; })) << reader.next_seq();
  const XidSnapshot s = ledger.read();
  ASSERT_EQ(s.counts.size(), 1u) << "seq 3 counted again";
  EXPECT_EQ(s.counts[0].first.process, "r6");
  EXPECT_EQ(s.records_lost, 0u);
  emit(10, 1, {10});  // 7, 8, 9 were overwritten before they were read
  ASSERT_TRUE(wait_for([&] { return reader.next_seq() == 11; }));
  EXPECT_EQ(ledger.read().records_lost, 3u);
  EXPECT_EQ(total(ledger), 2u);
}

TEST_F(KmsgReaderTest, AWaitingLineIsNotSavedAsRead) {
  // With the tracepoint attached a line waits for its twin; killed then, the next reader must
  // read it again.
  XidLedger ledger(std::chrono::hours(1));
  ledger.set_tracepoint(true);
  auto reader = std::make_unique<KmsgReader>(fifo_, pin_dir_, ledger);
  emit(0, 5, {2});
  ASSERT_TRUE(wait_for([&] { return ledger.read().log_lines == 1 && reader->next_seq() == 2; })) << reader->next_seq();
  reader.reset();
  XidLedger again;
  KmsgReader second(fifo_, pin_dir_, again);
  EXPECT_EQ(second.start_seq(), 2u);
  emit(0, 5, {2});
  ASSERT_TRUE(wait_for([&] { return second.next_seq() == 5; }));
  EXPECT_EQ(total(again), 1u);
}

TEST_F(KmsgReaderTest, NoPinNoPosition) {
  XidLedger ledger;
  {
    KmsgReader reader(fifo_, "", ledger);
    emit(0, 3, {1});
    ASSERT_TRUE(wait_for([&] { return reader.next_seq() == 3; }));
  }
  KmsgReader reader(fifo_, "", ledger);
  EXPECT_EQ(reader.start_seq(), 0u);
}

// The real kernel log: whatever prefix a process gives its line, the kernel files it under a user
// facility, and the agent counts it as forged, never as an XID.
class RecordingSink : public KmsgSink {
 public:
  RecordingSink(XidLedger& ledger, std::string marker) : ledger_(ledger), marker_(std::move(marker)) {}
  bool on_log_record(const KmsgRecord& r) override {
    if (r.message.find(marker_) == std::string_view::npos) return ledger_.on_log_record(r);
    const XidSnapshot before = ledger_.read();
    const bool settled = ledger_.on_log_record(r);
    const XidSnapshot after = ledger_.read();
    facility_ = r.facility;
    forged_ = after.forged_lines - before.forged_lines;
    counted_ = after.log_lines - before.log_lines;
    ++seen_;
    return settled;
  }
  void on_records_lost(uint64_t n) override { ledger_.on_records_lost(n); }
  std::optional<uint64_t> oldest_waiting() override { return ledger_.oldest_waiting(); }
  std::atomic<int> seen_{0};
  std::atomic<uint32_t> facility_{99};
  std::atomic<uint64_t> forged_{0}, counted_{0};

 private:
  XidLedger& ledger_;
  const std::string marker_;
};

TEST(KmsgReaderRealLog, AForgedXidLineIsNeverCounted) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to write /dev/kmsg";
  const std::string marker = "forged" + std::to_string(std::random_device{}() % 1000000);
  XidLedger ledger;
  RecordingSink sink(ledger, marker);
  KmsgReader reader("/dev/kmsg", "", sink);
  // "<4>": the kernel's facility (0) at level 4, which devkmsg_write() must not grant a process.
  const std::string line = "<4>NVRM: Xid (PCI:0000:cb:00): 79, pid=1, name=" + marker + ", GPU has fallen off the bus.\n";
  int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  close(fd);
  ASSERT_TRUE(wait_for([&] { return sink.seen_ == 1; })) << "the line never arrived";
  EXPECT_EQ(sink.facility_, 1u) << "LOG_USER";
  EXPECT_EQ(sink.forged_, 1u);
  EXPECT_EQ(sink.counted_, 0u);
  for (const auto& [series, n] : ledger.read().counts) EXPECT_NE(series.process, marker) << "a forged XID counted";
}

}  // namespace
}  // namespace vigil::agent
