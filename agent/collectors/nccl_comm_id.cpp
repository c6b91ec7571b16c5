// FNV-1a (Fowler/Noll/Vo, 64-bit offset basis and prime): short, fixed and dependency-free; the
// id is random bytes, so collisions are what a 64-bit hash gives, not an attacker's choice.
#include "collectors/nccl_comm_id.h"

#include <cstdint>
#include <cstdio>

namespace vigil::agent {

std::string nccl_comm_id(const unsigned char* id, size_t size) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < size; ++i) {
    h ^= id[i];
    h *= 0x100000001b3ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace vigil::agent
