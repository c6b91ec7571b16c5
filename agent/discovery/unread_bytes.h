// Bytes that reached a process's TCP sockets and that it has not read: the receive queues of its
// connections. A rank of a tensor-parallel group stopped inside a collective holds its peers'
// data unread while they wait for it; a waiting rank has read everything that came.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace vigil::agent {

// Which sockets are the process's: the socket:[INODE] links in PROC_ROOT/PID/fd. Their queues:
// PROC_ROOT/PID/net/tcp and tcp6 (the process's network namespace), the rx_queue of each
// established socket (the kernel's rcv_nxt - copied_seq: net/ipv4/tcp_ipv4.c get_tcp4_sock,
// net/ipv6/tcp_ipv6.c get_tcp6_sock). A workload decides how many fds and sockets there are:
// past kMaxUnreadScan of either the answer is nullopt, as for a process that is gone.
inline constexpr uint64_t kMaxUnreadScan = 65536;
std::optional<uint64_t> unread_tcp_bytes(const std::string& proc_root, uint32_t pid);

}  // namespace vigil::agent
