// XID probe on the real kernel (root). The NVIDIA tracepoint is absent here, so the attach-if-
// present path is checked both ways, and the BPF decoding of its record (two __data_loc strings
// around a u32) is checked live on sched:sched_process_exec, which has the same shape
// (filename, pid): an exec of /bin/true must decode as dev="/bin/true", code=the child's pid.
#include "probes/xid_probe.h"

#include <bpf/bpf.h>
#include <linux/types.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>

#include "xid_events.h"

namespace vigil::agent {
namespace {

TEST(XidProbe, AttachesOnlyWhenTheNvidiaTracepointExists) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to load BPF";
  AgentStats stats;
  struct stat st {};
  bool present = stat("/sys/kernel/tracing/events/nvidia/nvidia_dev_xid/format", &st) == 0;
  if (present) {
    EXPECT_NO_THROW(XidProbe("/sys/kernel/btf/vmlinux", stats));
  } else {
    EXPECT_THROW(XidProbe("/sys/kernel/btf/vmlinux", stats), TracepointMissing);
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
  XidProbe probe("/sys/kernel/btf/vmlinux", stats, tp);

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl("/bin/true", "true", nullptr);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  xid_key key{};
  std::strncpy(key.dev, "/bin/true", sizeof key.dev - 1);
  key.code = static_cast<__u32>(child);
  __u64 count = 0;
  ASSERT_EQ(bpf_map_lookup_elem(probe.xids_fd(), &key, &count), 0) << "no counter for (/bin/true, " << child << ")";
  EXPECT_EQ(count, 1u);
  // The event for our exec is in the ring buffer among other processes' execs.
  bool seen = false;
  std::string want = "gpu=/bin/true xid=" + std::to_string(child) + " ";
  std::string line;
  RingReader rings;  // drained on this thread (no start()), so recent_events() is ours to read
  probe.add_rings(rings);
  for (int i = 0; i < 50 && !seen; ++i) {
    rings.consume();
    for (const auto& l : probe.recent_events())
      if (l.find(want) != std::string::npos) {
        seen = true;
        line = l;
      }
    if (!seen) usleep(10000);
  }
  ASSERT_TRUE(seen) << "no event line with '" << want << "'";
  EXPECT_NE(line.find("msg=/bin/true"), std::string::npos) << line;
}

}  // namespace
}  // namespace vigil::agent
