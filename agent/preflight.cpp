// Start-up checks: kernel BTF readable, and CAP_BPF+CAP_PERFMON (or CAP_SYS_ADMIN) in effect.
#include "preflight.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
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

std::string check_privileges() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0)
    return std::string("cannot read capabilities: ") + std::strerror(errno);
  if (has_cap(data, CAP_SYS_ADMIN)) return {};
  if (has_cap(data, kCapBpf) && has_cap(data, kCapPerfmon)) return {};
  return "missing privileges: needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); run as root or "
         "grant them";
}

}  // namespace vigil::agent
