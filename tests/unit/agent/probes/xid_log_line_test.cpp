// The kernel log's record header and NVIDIA's XID line, on the shapes real drivers print: the
// open module's format strings (kernel_rc.c, 595.45.04), older drivers' "pid='<unknown>'", MIG
// attribution, and lines that merely resemble them.
#include "probes/xid_log_line.h"

#include <gtest/gtest.h>

#include "probes/kmsg_record.h"

namespace vigil::agent {
namespace {

TEST(KmsgRecord, HeaderFieldsAndMessage) {
  auto r = parse_kmsg_record("4,1234,5678901,-;NVRM: Xid (PCI:0000:cb:00): 79, GPU has fallen off the bus.\n"
                             " SUBSYSTEM=pci\n DEVICE=+pci:0000:cb:00.0\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->facility, 0u);
  EXPECT_EQ(r->level, 4u);
  EXPECT_EQ(r->seq, 1234u);
  EXPECT_EQ(r->ts_usec, 5678901u);
  EXPECT_EQ(r->message, "NVRM: Xid (PCI:0000:cb:00): 79, GPU has fallen off the bus.");
}

TEST(KmsgRecord, FacilityOfALineAProcessWrote) {
  // devkmsg_write() gives a line without a facility LOG_USER: prio 12 = (1 << 3) | 4.
  auto r = parse_kmsg_record("12,7,100,-;NVRM: Xid (PCI:0000:cb:00): 79, forged");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->facility, 1u);
  EXPECT_EQ(r->level, 4u);
}

TEST(KmsgRecord, MoreHeaderFieldsAreAllowed) {
  auto r = parse_kmsg_record("6,339,5140900,-,caller=T1;text");  // CONFIG_PRINTK_CALLER
  ASSERT_TRUE(r);
  EXPECT_EQ(r->seq, 339u);
  EXPECT_EQ(r->message, "text");
}

TEST(KmsgRecord, MalformedHeaders) {
  for (const char* bad : {"", ";x", "4,1,2;x", "a,1,2,-;x", "4,,2,-;x", "4,1,2,-", "99999999999,1,2,-;x", "-1,1,2,-;x"})
    EXPECT_FALSE(parse_kmsg_record(bad)) << bad;
}

TEST(XidLogLine, WithProcess) {
  auto l = parse_xid_log_line(
      "NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, errorString CTX SWITCH "
      "TIMEOUT, Info 0x58005");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->gpu, "0000:cb:00.0");
  EXPECT_EQ(l->code, 109u);
  EXPECT_EQ(l->pid, 1797828u);
  EXPECT_EQ(l->process, "pt_main_thread");
  EXPECT_EQ(l->message, "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005");
}

TEST(XidLogLine, OlderDriversUnknownProcess) {
  auto l = parse_xid_log_line(
      "NVRM: Xid (PCI:0000:CB:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, "
      "SM 0): Illegal Instruction Parameter");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->gpu, "0000:cb:00.0");  // lower case, as pci_name() prints it
  EXPECT_EQ(l->code, 13u);
  EXPECT_FALSE(l->pid);
  EXPECT_EQ(l->process, "");
  EXPECT_EQ(l->message, "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter");
}

TEST(XidLogLine, NoProcess) {
  auto l = parse_xid_log_line("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->gpu, "0000:3b:00.0");
  EXPECT_EQ(l->code, 79u);
  EXPECT_EQ(l->process, "");
  EXPECT_EQ(l->message, "GPU has fallen off the bus.");
}

TEST(XidLogLine, MigInstancesAndPidWithoutName) {
  auto l = parse_xid_log_line("NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). "
                              "RST: No, D-RST: No");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->gpu, "0000:01:00.0");
  EXPECT_EQ(l->code, 94u);
  EXPECT_EQ(l->pid, 7194u);
  EXPECT_EQ(l->process, "");
  EXPECT_EQ(l->message, "Contained: CE User Channel (0x9). RST: No, D-RST: No");
  auto ci = parse_xid_log_line("NVRM: Xid (PCI:0000:01:00 GPU-I:02 GPU-CI:01): 43, pid=9, name=python3, Ch 0000003c");
  ASSERT_TRUE(ci);
  EXPECT_EQ(ci->code, 43u);
  EXPECT_EQ(ci->process, "python3");
}

TEST(XidLogLine, LongProcessNamesAreCut) {
  auto l = parse_xid_log_line("NVRM: Xid (PCI:0000:01:00): 31, pid=5, name=a-very-long-process-name, x");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->process, "a-very-long-pro");
  EXPECT_EQ(l->process.size(), kXidProcessMax);
}

TEST(XidLogLine, RootCauseSuffixStaysInTheMessage) {
  auto l = parse_xid_log_line("NVRM: Xid (PCI:0000:01:00): 45, pid=5, name=p, Ch 00000010 caused by previous Xid 31");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->message, "Ch 00000010 caused by previous Xid 31");
}

TEST(XidLogLine, NotXidLines) {
  for (const char* bad : {
           "NVRM: GPU at PCI:0000:01:00: GPU-1234",
           "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error",
           "NVRM: Xid (PCI:0000:cb): 79, x",
           "NVRM: Xid (PCI:00g0:cb:00): 79, x",
           "NVRM: Xid (PCI:0000:cb:00): , x",
           "NVRM: Xid (PCI:0000:cb:00): 79 x",
           "NVRM: Xid (PCI:0000:cb:00): -1, x",
           "NVRM: Xid (PCI:0000:cb:00): 99999999999, x",
       })
    EXPECT_FALSE(parse_xid_log_line(bad)) << bad;
  EXPECT_TRUE(looks_like_xid_line("NVRM: Xid (PCI:0000:cb): 79, x"));
  EXPECT_FALSE(looks_like_xid_line("NVRM: GPU at PCI:0000:01:00"));
}

}  // namespace
}  // namespace vigil::agent
