// Unread bytes of a process's TCP connections against the kernel's own receive queue: a loopback
// connection of this test process with N bytes sent and not read holds exactly N (what the
// kernel's FIONREAD says too); a /proc with more sockets than the limit gives no answer.
#include "discovery/unread_bytes.h"

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <chrono>

namespace vigil::agent {
namespace {

struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() { if (fd >= 0) close(fd); }
};

TEST(UnreadBytes, AConnectionsUnreadDataIsTheKernelsReceiveQueue) {
  Fd listener(socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener.fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  Fd client(socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_EQ(connect(client.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  Fd server(accept(listener.fd, nullptr, nullptr));
  ASSERT_GE(server.fd, 0);

  const auto before = unread_tcp_bytes("/proc", static_cast<uint32_t>(getpid()));
  ASSERT_TRUE(before.has_value());
  const std::string payload(1392, 'x');
  ASSERT_EQ(write(client.fd, payload.data(), payload.size()), static_cast<ssize_t>(payload.size()));
  int queued = 0;
  for (int i = 0; i < 100 && queued < static_cast<int>(payload.size()); ++i) {  // loopback delivery
    ioctl(server.fd, FIONREAD, &queued);
    if (queued < static_cast<int>(payload.size())) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(queued, 1392);
  const auto held = unread_tcp_bytes("/proc", static_cast<uint32_t>(getpid()));
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(*held - *before, 1392u);

  char buf[2048];
  ASSERT_EQ(read(server.fd, buf, sizeof buf), 1392);
  EXPECT_EQ(unread_tcp_bytes("/proc", static_cast<uint32_t>(getpid())), before);
}

TEST(UnreadBytes, NoAnswerForAProcessGoneOrPastTheLimit) {
  const auto root = std::filesystem::temp_directory_path() / ("vigil-unread-" + std::to_string(getpid()));
  std::filesystem::create_directories(root / "7" / "fd");
  std::filesystem::create_directories(root / "7" / "net");
  std::filesystem::create_symlink("socket:[4242]", root / "7" / "fd" / "3");
  {
    std::ofstream tcp(root / "7" / "net" / "tcp");
    tcp << "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
    tcp << "   0: 0100007F:9C40 0100007F:B2E6 01 00000000:00000570 00:00000000 00000000     0        0 4242 1 0 20 4 30 10 -1\n";
    tcp << "   1: 0100007F:9C41 0100007F:B2E7 01 00000000:00000100 00:00000000 00000000     0        0 9999 1 0 20 4 30 10 -1\n";
    tcp << "   2: 00000000:9C40 00000000:0000 0A 00000000:00000005 00:00000000 00000000     0        0 4242 1 0 100 0 0 10 0\n";
  }
  // Its own established socket only: 0x570 = 1392 (not another process's 0x100, not a listener's backlog).
  EXPECT_EQ(unread_tcp_bytes(root.string(), 7), 1392u);
  EXPECT_EQ(unread_tcp_bytes(root.string(), 8), std::nullopt);
  {
    std::ofstream tcp(root / "7" / "net" / "tcp6");
    tcp << "header\n";
    for (uint64_t i = 0; i < kMaxUnreadScan; ++i) tcp << "   0: x y 01 00000000:00000001 0 0 0 0 1\n";
  }
  EXPECT_EQ(unread_tcp_bytes(root.string(), 7), std::nullopt);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace vigil::agent
