// Start-up checks: kernel BTF readable, and the capabilities the enabled probe sets need in effect
// (docs/deploy.md, "Privileges, and why").
#include "preflight.h"

#include <linux/capability.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>

namespace vigil::agent {
namespace {

// CAP_BPF and CAP_PERFMON arrived in 5.8; older uapi headers may lack the names.
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

bool has_cap(const __user_cap_data_struct* data, int cap) {
  return (data[cap / 32].effective >> (cap % 32)) & 1U;
}

// Whether this kernel lets us create a uprobe. Since Linux 6.13 perf_uprobe_event_init
// (kernel/events/core.c) demands CAP_SYS_ADMIN, where CAP_PERFMON sufficed before; the check
// comes before anything is created, so an offset past the end of the file tells the two apart
// without placing a probe: EACCES is the capability, anything else got past it.
bool uprobes_allowed() {
  std::ifstream type_file("/sys/bus/event_source/devices/uprobe/type");
  uint32_t type = 0;
  if (!(type_file >> type)) return true;  // no uprobe PMU: libbpf falls back, and says why itself
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = type;
  static const char kSelf[] = "/proc/self/exe";
  attr.config1 = reinterpret_cast<uintptr_t>(kSelf);
  attr.config2 = UINT64_MAX;
  const long fd = syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd >= 0) {
    close(static_cast<int>(fd));
    return true;
  }
  return errno != EACCES;
}

}  // namespace

std::string check_kernel_btf(const std::string& btf_path) {
  std::ifstream in(btf_path, std::ios::binary);
  char magic[2] = {};
  if (!in || !in.read(magic, 2))
    return "kernel BTF not readable at " + btf_path +
           " (needs CONFIG_DEBUG_INFO_BTF=y, or set kernel_btf: to a BTF file for this kernel)";
  // BTF starts with magic 0xeB9F in host byte order.
  if (static_cast<unsigned char>(magic[0]) != 0x9f || static_cast<unsigned char>(magic[1]) != 0xeb)
    return btf_path + " is not a BTF file";
  return {};
}

std::string check_privileges(bool uprobes) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0)
    return std::string("cannot read capabilities: ") + std::strerror(errno);
  const bool admin = has_cap(data, CAP_SYS_ADMIN);
  if (!admin && !(has_cap(data, kCapBpf) && has_cap(data, kCapPerfmon)))
    return "missing privileges: needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); run as root or "
           "grant them";
  // Without it /proc/PID/maps of another user's process reads as empty: no library would ever
  // be found, silently.
  if (!has_cap(data, CAP_SYS_PTRACE))
    return "missing privileges: needs CAP_SYS_PTRACE to read other processes' /proc/PID/maps, "
           "map_files and root (the libraries it probes)";
  // /proc/PID/map_files is mode 0500, owned by the process's user: only CAP_DAC_READ_SEARCH lets
  // the agent open the libraries of another user's process through it (discovery/mapped_file).
  if (uprobes && !has_cap(data, CAP_DAC_READ_SEARCH))
    return "missing privileges: needs CAP_DAC_READ_SEARCH to open the libraries other users' processes map "
           "through /proc/PID/map_files (searchable by its owner only)";
  if (uprobes && !admin && !uprobes_allowed())
    return "missing privileges: this kernel creates uprobes only with CAP_SYS_ADMIN (Linux 6.13+; "
           "CAP_PERFMON no longer suffices): the CUDA, NCCL and USDT probes need it";
  return {};
}

}  // namespace vigil::agent
