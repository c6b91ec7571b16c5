// The XID collector renders a hand-made ledger snapshot: one series per GPU, code and process,
// with the code's class from NVIDIA's catalogue, and the kernel log reader's own counts.
#include "collectors/xid_collector.h"

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include <string>

#include "collectors/xid_catalogue.h"

namespace vigil::agent {
namespace {

class FakeXid : public XidReader {
 public:
  XidSnapshot read() const override { return snapshot; }
  XidSnapshot snapshot;
};

std::string label(const prometheus::ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label)
    if (l.name == name) return l.value;
  return "<none>";
}

TEST(XidCollector, OneSeriesPerGpuCodeAndProcessWithItsClass) {
  FakeXid xids;
  xids.snapshot.counts = {{{"0000:3b:00.0", 13, "python3"}, 5},
                          {{"0000:3b:00.0", 48, ""}, 2},
                          {{"0000:3b:00.0", 79, ""}, 1},
                          {{"0000:cb:00.0", 999, "x"}, 1}};
  xids.snapshot.forged_lines = 3;
  xids.snapshot.records_lost = 7;
  const auto fs = XidCollector(xids).Collect();
  ASSERT_EQ(fs.size(), 5u);
  EXPECT_EQ(fs[0].name, "gpu_xid_errors_total");
  ASSERT_EQ(fs[0].metric.size(), 4u);
  const auto& m = fs[0].metric;
  EXPECT_EQ(label(m[0], "gpu"), "0000:3b:00.0");
  EXPECT_EQ(label(m[0], "xid"), "13");
  EXPECT_EQ(label(m[0], "class"), "application");
  EXPECT_EQ(label(m[0], "process"), "python3");
  EXPECT_EQ(m[0].counter.value, 5);
  EXPECT_EQ(label(m[1], "class"), "fatal");
  EXPECT_EQ(label(m[1], "process"), "");
  EXPECT_EQ(label(m[2], "class"), "fatal");
  EXPECT_EQ(label(m[3], "class"), "unknown");
  EXPECT_EQ(fs[2].name, "vigil_agent_xid_forged_lines_total");
  EXPECT_EQ(fs[2].metric[0].counter.value, 3);
  EXPECT_EQ(fs[3].name, "vigil_agent_kmsg_records_lost_total");
  EXPECT_EQ(fs[3].metric[0].counter.value, 7);
}

TEST(XidCollector, NoXidNoSeries) {
  FakeXid xids;
  const auto fs = XidCollector(xids).Collect();
  EXPECT_TRUE(fs[0].metric.empty());
}

// Codes the catalogue's Immediate Action names, per class (docs/xid_catalogue.md).
TEST(XidCatalogue, ClassesOfTheCodesOnCallActsOn) {
  for (uint32_t code : {48u, 62u, 64u, 74u, 79u, 95u, 109u, 119u, 120u, 140u, 143u})
    EXPECT_EQ(xid_class(code), XidClass::kFatal) << code;
  for (uint32_t code : {63u, 92u, 94u}) EXPECT_EQ(xid_class(code), XidClass::kHardware) << code;
  for (uint32_t code : {13u, 31u, 43u, 45u, 68u}) EXPECT_EQ(xid_class(code), XidClass::kApplication) << code;
  for (uint32_t code : {38u, 154u}) EXPECT_EQ(xid_class(code), XidClass::kDriver) << code;
  for (uint32_t code : {0u, 1u, 61u, 177u, 4000000000u}) EXPECT_EQ(xid_class(code), XidClass::kUnknown) << code;
  EXPECT_EQ(xid_class_name(XidClass::kFatal), "fatal");
  EXPECT_EQ(xid_class_name(XidClass::kUnknown), "unknown");
}

}  // namespace
}  // namespace vigil::agent
