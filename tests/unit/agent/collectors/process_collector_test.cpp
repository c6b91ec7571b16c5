// /proc/PID/stat parsing: fields counted from the last ')' whatever the process named itself.
#include "collectors/process_collector.h"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

// A line of this kernel's /proc/PID/stat (52 fields), with a comm a workload chose.
constexpr const char* kLine =
    "4242 (a) (b c)) S 1 4242 4242 0 -1 4194560 1200 0 3 0 731 129 0 0 20 0 7 0 98765 523300864 "
    "3801 18446744073709551615 1 1 0 0 0 0 0 4096 17000 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0";

TEST(ProcessCollector, ParsesFieldsAfterTheLastParenthesis) {
  auto st = parse_proc_stat(kLine);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->utime_ticks, 731u);
  EXPECT_EQ(st->stime_ticks, 129u);
  EXPECT_EQ(st->threads, 7u);
  EXPECT_EQ(st->start_ticks, 98765u);
  EXPECT_EQ(st->vsize_bytes, 523300864u);
  EXPECT_EQ(st->rss_pages, 3801u);
}

TEST(ProcessCollector, RefusesShortOrBrokenLines) {
  EXPECT_FALSE(parse_proc_stat(""));
  EXPECT_FALSE(parse_proc_stat("4242 (x) S 1 4242"));
  EXPECT_FALSE(parse_proc_stat("4242 no parenthesis S 1"));
  std::string garbled = kLine;
  garbled.replace(garbled.find(" 731 "), 5, " 7x1 ");
  EXPECT_FALSE(parse_proc_stat(garbled));
}

}  // namespace
}  // namespace vigil::agent
