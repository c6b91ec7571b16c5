// The label that names an NCCL communicator on every rank: a hash of the ncclUniqueId all its
// ranks passed to ncclCommInitRank (docs/correlation.md).
#pragma once

#include <cstddef>
#include <string>

namespace vigil::agent {

// FNV-1a 64 of the id's bytes as 16 lowercase hex digits: stable across agents and builds.
std::string nccl_comm_id(const unsigned char* id, size_t size);

}  // namespace vigil::agent
