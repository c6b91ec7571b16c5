// Where BPF state that outlives the agent is pinned: a bpffs directory per schema version and set
// (/sys/fs/bpf/vigil/v1/cuda), the bpffs mount itself, and the uninstall that removes it all.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace vigil::agent {

// The layout of every pinned map (types, sizes, flags). Bump it whenever a pinned map's
// definition changes in bpf/: libbpf refuses to reuse a pin that differs, and a new directory
// keeps an old agent of the previous layout counting in its own maps.
constexpr int kPinSchema = 1;

// ROOT/v<kPinSchema>/SET, created (with its parents) when missing; throws std::runtime_error.
// When ROOT lies under /sys/fs/bpf and nothing is mounted there, bpffs is mounted first.
std::string make_pin_dir(const std::string& root, const std::string& set);

// Removes every pin under ROOT (maps and directories of all schema versions) and ROOT itself;
// returns the number of pins removed, or -errno. A missing ROOT removes nothing.
int remove_pins(const std::string& root);

// CLOCK_BOOTTIME now, in ns: the clock of /proc/PID/stat's start time.
uint64_t boot_time_ns();

// The start time of PID since boot, in ns (/proc/PID/stat field 22); 0 when unreadable.
uint64_t process_start_ns(const std::string& proc_root, uint32_t pid);

}  // namespace vigil::agent
