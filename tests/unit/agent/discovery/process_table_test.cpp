// The process table's mirror into the kernel (proc set's `tracked` map): an entry is reported when
// a live process gets one, withdrawn when it goes (exec, or the sweep after the grace period), and
// never reported for a process already gone. A fake /proc tree stands in for the real one.
#include "discovery/process_table.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

namespace vigil::agent {
namespace {

namespace fs = std::filesystem;

class ProcessTableMirror : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("vigil_proc_" + std::to_string(getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void spawn(uint32_t pid, const std::string& comm) {
    fs::create_directories(root_ / std::to_string(pid));
    std::ofstream(root_ / std::to_string(pid) / "comm") << comm << "\n";
    std::ofstream(root_ / std::to_string(pid) / "cgroup") << "0::/\n";
  }
  void kill(uint32_t pid) { fs::remove_all(root_ / std::to_string(pid)); }

  using Calls = std::vector<ProcessTable::Change>;
  fs::path root_;
  Calls calls_;
  // Every change the table queued so far, in order.
  const Calls& calls() {
    for (const auto& c : table().take_changes()) calls_.push_back(c);
    return calls_;
  }

  // A table on root_ (made after SetUp chose it) with no grace period.
  ProcessTable& table() {
    if (!real_) {
      real_ = std::make_unique<ProcessTable>(root_.string(), std::chrono::milliseconds(0));
      real_->record_changes(true);
    }
    return *real_;
  }
  std::unique_ptr<ProcessTable> real_;
};

TEST_F(ProcessTableMirror, LiveProcessReportedOnceThenWithdrawnAtSweep) {
  spawn(42, "python");
  EXPECT_EQ(table().labels(42).comm, "python");
  EXPECT_EQ(table().labels(42).comm, "python");
  EXPECT_FALSE(table().expired(42));
  EXPECT_EQ(calls(), (Calls{{42, true}}));
  table().mark_exited(42);  // the kernel dropped it from `tracked` itself
  EXPECT_TRUE(table().expired(42));
  table().sweep();
  EXPECT_EQ(calls(), (Calls{{42, true}, {42, false}}));
  EXPECT_EQ(table().size(), 0u);
}

TEST_F(ProcessTableMirror, ExecWithdrawsAndNextLookupReportsAgain) {
  spawn(7, "bash");
  table().labels(7);
  table().mark_exec(7);
  std::ofstream(root_ / "7" / "comm") << "nvidia-smi\n";
  EXPECT_EQ(table().labels(7).comm, "nvidia-smi");
  EXPECT_EQ(calls(), (Calls{{7, true}, {7, false}, {7, true}}));
}

TEST_F(ProcessTableMirror, ProcessAlreadyGoneIsNeverReported) {
  // A series that outlived its process: the entry exists for the grace period, no exit will come.
  EXPECT_EQ(table().labels(99).comm, "");
  EXPECT_TRUE(table().expired(99));
  table().mark_exec(99);
  table().sweep();
  EXPECT_TRUE(calls().empty());
}

TEST_F(ProcessTableMirror, ExitedEntryIsNotReportedAgain) {
  spawn(5, "worker");
  table().labels(5);
  table().mark_exited(5);
  kill(5);
  EXPECT_TRUE(table().expired(5));
  EXPECT_EQ(calls(), (Calls{{5, true}}));
}

TEST_F(ProcessTableMirror, NothingQueuedWhileNotRecording) {
  spawn(8, "python");
  table().record_changes(false);  // no proc set: nothing drains the queue, so none may grow
  table().labels(8);
  table().record_changes(true);
  EXPECT_TRUE(calls().empty());
  table().mark_exec(8);  // never reported present: no withdrawal either
  EXPECT_TRUE(calls().empty());
}

}  // namespace
}  // namespace vigil::agent
