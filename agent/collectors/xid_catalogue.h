// NVIDIA's XID catalogue reduced to what an on-call engineer acts on: the class of each code
// (sources, document versions and each code's reason: docs/probes-agent.md, "XID classes").
#pragma once

#include <cstdint>
#include <string_view>

namespace vigil::agent {

enum class XidClass {
  kFatal,        // the GPU needs a reset or the node a drain: pages (P1)
  kHardware,     // the hardware reported it and recovered (e.g. a row remapped): ticket (P2)
  kDriver,       // driver or firmware: ticket
  kApplication,  // the workload's own fault (illegal address, a page fault): ticket
  kUnknown,      // not in the catalogue
};

XidClass xid_class(uint32_t code);
std::string_view xid_class_name(XidClass c);

}  // namespace vigil::agent
