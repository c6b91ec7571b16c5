// The XID collector renders a hand-made snapshot of xid.bpf.c's counters: one series per GPU and
// code, every occurrence counted.
#include "collectors/xid_collector.h"

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace vigil::agent {
namespace {

class FakeXid : public XidReader {
 public:
  XidSnapshot read() const override { return snapshot; }
  XidSnapshot snapshot;
};

xid_key key(const char* dev, uint32_t code) {
  xid_key k{};
  std::memcpy(k.dev, dev, std::min(std::strlen(dev), sizeof k.dev));  // a full-length name has no NUL
  k.code = code;
  return k;
}

TEST(XidCollector, OneSeriesPerGpuAndCode) {
  FakeXid xids;
  const std::string full(XID_DEV_LEN, 'f');
  xids.snapshot.counts = {{key("0000:3b:00.0", 79), 1}, {key("0000:3b:00.0", 48), 2}, {key(full.c_str(), 13), 5}};
  const auto fs = XidCollector(xids).Collect();
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].name, "gpu_xid_errors_total");
  ASSERT_EQ(fs[0].metric.size(), 3u);
  EXPECT_EQ(fs[0].metric[0].label[0].value, "0000:3b:00.0");
  EXPECT_EQ(fs[0].metric[0].label[1].value, "79");
  EXPECT_EQ(fs[0].metric[1].counter.value, 2);
  EXPECT_EQ(fs[0].metric[2].label[0].value, full);  // bounded by the array, not by a NUL
  EXPECT_EQ(fs[0].metric[2].counter.value, 5);
}

TEST(XidCollector, NoXidNoSeries) {
  FakeXid xids;
  const auto fs = XidCollector(xids).Collect();
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_TRUE(fs[0].metric.empty());
}

}  // namespace
}  // namespace vigil::agent
