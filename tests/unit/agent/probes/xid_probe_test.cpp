// XID probe on the real kernel (root). The NVIDIA tracepoint is absent here, so the attach-if-
// present path is checked both ways, and the BPF decoding of its record (two __data_loc strings
// around a u32) is checked live on sched:sched_process_exec, which has the same shape
// (filename, pid): an exec of /bin/true must decode as dev="/bin/true", code=the child's pid, and
// reach the ledger, which counts it once when no kernel log line pairs with it.
#include "probes/xid_probe.h"

#include "probes/xid_ledger.h"

#include <bpf/bpf.h>
#include <linux/types.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <tuple>
#include <vector>

namespace vigil::agent {
namespace {

TEST(XidProbe, AttachesOnlyWhenTheNvidiaTracepointExists) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to load BPF";
  AgentStats stats;
  struct stat st {};
  bool present = stat("/sys/kernel/tracing/events/nvidia/nvidia_dev_xid/format", &st) == 0;
  if (present) {
    EXPECT_NO_THROW(XidProbe("/sys/kernel/btf/vmlinux", stats, [](auto&&...) {}));
  } else {
    EXPECT_THROW(XidProbe("/sys/kernel/btf/vmlinux", stats, [](auto&&...) {}), TracepointMissing);
    EXPECT_EQ(stats.snapshot().attached.count("xid"), 0u);
  }
}

TEST(XidProbe, DecodesDataLocStringsAndCodeLive) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to load BPF";
  AgentStats stats;
  XidTracepoint tp;
  tp.category = "sched";
  tp.name = "sched_process_exec";
  tp.dev_field = "filename";
  tp.code_field = "pid";
  tp.msg_field = "filename";
  std::vector<std::tuple<std::string, uint32_t, std::string>> events;
  XidLedger ledger;
  ledger.set_tracepoint(true);
  XidProbe probe(
      "/sys/kernel/btf/vmlinux", stats,
      [&](const std::string& gpu, uint32_t code, const std::string& msg) {
        events.emplace_back(gpu, code, msg);
        ledger.on_tracepoint(gpu, code, msg);
      },
      tp);
  RingReader rings;  // drained on this thread (no start()): the callback runs here
  probe.add_rings(rings);

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl("/bin/true", "true", nullptr);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  // The event for our exec is in the ring buffer among other processes' execs.
  const auto ours = std::make_tuple(std::string("/bin/true"), static_cast<uint32_t>(child), std::string("/bin/true"));
  int seen = 0;
  for (int i = 0; i < 50 && seen == 0; ++i) {
    rings.consume();
    seen = static_cast<int>(std::count(events.begin(), events.end(), ours));
    if (seen == 0) usleep(10000);
  }
  ASSERT_EQ(seen, 1) << "events for our exec";
  const std::string want = "gpu=/bin/true xid=" + std::to_string(child) + " ";
  bool logged = false;
  for (const auto& l : probe.recent_events()) logged |= l.find(want) != std::string::npos && l.find("msg=/bin/true") != std::string::npos;
  EXPECT_TRUE(logged) << "no event line with '" << want << "'";

  // No log line is its twin: the ledger counts it alone once its window has passed.
  ledger.settle(XidLedger::Clock::now() + std::chrono::hours(1));
  uint64_t ours_counted = 0;
  for (const auto& [series, n] : ledger.read().counts)
    if (series.gpu == "/bin/true" && series.code == static_cast<uint32_t>(child) && series.process.empty())
      ours_counted += n;
  EXPECT_EQ(ours_counted, 1u) << "the tracepoint's event counted alone";
}

}  // namespace
}  // namespace vigil::agent
