// One record of the kernel log as /dev/kmsg hands it out (Documentation/ABI/testing/dev-kmsg):
//   "PRIO,SEQ,TS_USEC,FLAG[,more fields];MESSAGE\n" then optional " KEY=VALUE\n" lines.
// PRIO is (facility << 3) | level. The kernel escapes bytes of MESSAGE below ' ', above '~' and
// '\' as \xNN, so a message is one line and no process can forge a record boundary.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace vigil::agent {

struct KmsgRecord {
  uint32_t facility = 0;  // 0: the kernel; a process writing to /dev/kmsg gets 1 (LOG_USER) or more
  uint32_t level = 0;
  uint64_t seq = 0;
  uint64_t ts_usec = 0;    // since boot
  std::string_view message;  // without the newline; points into the parsed buffer
};

// Parses the first record of TEXT (one read() of /dev/kmsg returns one record); nullopt when the
// header is malformed.
std::optional<KmsgRecord> parse_kmsg_record(std::string_view text);

// The facility the kernel's own messages carry; devkmsg_write() in kernel/printk/printk.c never
// gives it to a line a process writes.
inline constexpr uint32_t kKernelFacility = 0;

}  // namespace vigil::agent
