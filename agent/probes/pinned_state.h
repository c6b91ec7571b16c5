// Where BPF state that outlives the agent is pinned: a bpffs directory per schema version and set
// (/sys/fs/bpf/vigil/v1/cuda), the bpffs mount itself, and the uninstall that removes it all.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

struct bpf_object;

namespace vigil::agent {

// The layout of every pinned map (types, sizes, flags). Bump it whenever a pinned map's
// definition changes in bpf/: libbpf refuses to reuse a pin that differs, and a new directory
// keeps an old agent of the previous layout counting in its own maps.
constexpr int kPinSchema = 1;

// ROOT/v<kPinSchema>/SET, created (with its parents) when missing; throws std::runtime_error.
// When ROOT lies under /sys/fs/bpf and nothing is mounted there, bpffs is mounted first.
std::string make_pin_dir(const std::string& root, const std::string& set);

// make_pin_dir for a probe set, or "" (said in one line: the set's state then dies with the agent)
// when ROOT is "" or the directory cannot be made.
std::string set_pin_dir(const std::string& root, const std::string& set);

// Before load: each map of OBJ named in NAMES is reused from DIR/<name> when pinned there (libbpf
// checks its type, sizes and flags: a difference fails the load with -EINVAL), or pinned there.
// 0 or a libbpf error (a name the object lacks: -ENOENT).
int pin_maps(bpf_object* obj, const std::string& dir, const std::vector<const char*>& names);

// Loads a set's object with LOAD(PIN_DIR) (0 or a libbpf error). When that fails with pins (the maps
// pinned there do not match this build: their numbers cannot be adopted), says so in one line and
// loads again without them. Returns whether the maps are pinned; throws std::runtime_error when a
// load without pins fails.
bool load_with_pins(const std::string& set, const std::string& pin_dir,
                    const std::function<int(const std::string& pin_dir)>& load);

// Removes every pin under ROOT (maps and directories of all schema versions) and ROOT itself;
// returns the number of pins removed, or -errno. A missing ROOT removes nothing.
int remove_pins(const std::string& root);

// CLOCK_BOOTTIME now, in ns: the clock of /proc/PID/stat's start time.
uint64_t boot_time_ns();

// The start time of PID since boot, in ns (/proc/PID/stat field 22); 0 when unreadable.
uint64_t process_start_ns(const std::string& proc_root, uint32_t pid);

}  // namespace vigil::agent
