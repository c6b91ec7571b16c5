// Fixture for check_map_owners.py: a collector that deletes, walks and updates a map itself
// (placed as collectors/collector_writes_map.cpp). Never built.
#include <bpf/bpf.h>

#include "probes/bpf_util.h"

void forget(int fd, unsigned pid) {
  bpf_map_delete_elem(fd, &pid);  // map owner violation
  for (unsigned k : vigil::agent::map_keys<unsigned>(fd)) (void)k;  // map owner violation
  unsigned long one = 1;
  bpf_map_update_elem(fd, &pid, &one, 0);  // map owner violation
  // bpf_map_delete_elem in a comment is not a call
  /* nor map_entries<int, int>(fd) in a block comment */
}
