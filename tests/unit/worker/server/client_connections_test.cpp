// The per-address connection count: IPv4 clients of a dual-stack listener count as their IPv4
// address, and an address's count returns to zero when its connections close.
#include "server/client_connections.h"

#include <gtest/gtest.h>

namespace vigil {
namespace {

namespace ip = boost::asio::ip;

TEST(ClientConnections, AnIpv4MappedAddressCountsAsItsIpv4Address) {
  EXPECT_EQ(ClientConnections::key(ip::make_address("::ffff:10.1.2.3")), "10.1.2.3");
  EXPECT_EQ(ClientConnections::key(ip::make_address("10.1.2.3")), "10.1.2.3");
  ClientConnections clients;
  clients.add(ClientConnections::key(ip::make_address("::ffff:10.1.2.3")));
  clients.add(ClientConnections::key(ip::make_address("10.1.2.3")));
  EXPECT_EQ(clients.count("10.1.2.3"), 2);
}

// A host that owns a /64 cannot walk around its share by changing the low 64 bits.
TEST(ClientConnections, AnIpv6AddressCountsAsItsSlash64) {
  EXPECT_EQ(ClientConnections::key(ip::make_address("2001:db8:1:2::7")), "2001:db8:1:2::/64");
  EXPECT_EQ(ClientConnections::key(ip::make_address("2001:db8:1:2:ffff:ffff:ffff:ffff")), "2001:db8:1:2::/64");
  EXPECT_EQ(ClientConnections::key(ip::make_address("2001:db8:1:3::7")), "2001:db8:1:3::/64");
  EXPECT_EQ(ClientConnections::key(ip::make_address("::1")), "::/64");
}

TEST(ClientConnections, CountsFallBackToZero) {
  ClientConnections clients;
  clients.add("10.0.0.1");
  clients.add("10.0.0.2");
  clients.remove("10.0.0.1");
  EXPECT_EQ(clients.count("10.0.0.1"), 0);
  EXPECT_EQ(clients.count("10.0.0.2"), 1);
  clients.remove("10.0.0.1");  // an address with none open stays at zero
  EXPECT_EQ(clients.count("10.0.0.1"), 0);
}

}  // namespace
}  // namespace vigil
