// NVIDIA's XID line in the kernel log, as krcReportXid() in the open kernel module prints it
// (src/nvidia/src/kernel/gpu/rc/kernel_rc.c, 595.45.04):
//   "NVRM: Xid (PCI:%04x:%02x:%02x[ GPU-I:%02u[ GPU-CI:%02u]]): %d, pid=%s, name=%s, MSG"
//   "NVRM: Xid (PCI:%04x:%02x:%02x): %d, MSG"            (no channel, no RM call: no process)
// Drivers before the change print "pid='<unknown>', name=<unknown>, " where there is no process.
// The PCI address has no function number; NVIDIA GPUs are function 0, so "0000:cb:00" becomes the
// tracepoint's pci_name() form "0000:cb:00.0" and both sources name a GPU alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vigil::agent {

struct XidLogLine {
  std::string gpu;      // "0000:cb:00.0"
  uint32_t code = 0;
  std::optional<uint32_t> pid;
  std::string process;  // "" when the line names none
  std::string message;  // what follows the process: the tracepoint's msg, plus a root-cause suffix
};

// The process name kept from a line: the kernel's comm is 15 bytes; the driver's field may be longer.
inline constexpr size_t kXidProcessMax = 15;

// nullopt unless MESSAGE (one kernel log message) is an XID line.
std::optional<XidLogLine> parse_xid_log_line(std::string_view message);

// Whether MESSAGE looks like an XID line at all (cheap; for lines that must not count, e.g. forged).
bool looks_like_xid_line(std::string_view message);

}  // namespace vigil::agent
