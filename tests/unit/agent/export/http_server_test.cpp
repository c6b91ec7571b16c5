// The agent's HTTP server: routes GET paths to the handler, refuses other methods, malformed and
// oversized requests, and keeps serving after a client misbehaves.
#include "export/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

namespace vigil::agent {
namespace {

std::string exchange(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "connect failed";
  }
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

class HttpServerTest : public ::testing::Test {
 protected:
  HttpServer server{"127.0.0.1", 0, [](const std::string& path) {
                      if (path == "/metrics") return HttpResponse{200, "text/plain", "up 1\n"};
                      return HttpResponse{404, "text/plain", "no\n"};
                    }};
};

TEST_F(HttpServerTest, ServesGetWithLengthAndClose) {
  std::string r = exchange(server.port(), "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Length: 5\r\n"), std::string::npos);
  EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(r.substr(r.size() - 5), "up 1\n");
}

TEST_F(HttpServerTest, UnknownPathIsTheHandlers404) {
  EXPECT_EQ(exchange(server.port(), "GET /nope HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
}

TEST_F(HttpServerTest, RefusesOtherMethodsAndGarbage) {
  EXPECT_EQ(exchange(server.port(), "POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(exchange(server.port(), "GARBAGE\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
}

TEST_F(HttpServerTest, OversizedHeadIsDroppedAndServingContinues) {
  std::string huge = "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n";
  EXPECT_EQ(exchange(server.port(), huge).find("200 OK"), std::string::npos);
  EXPECT_EQ(exchange(server.port(), "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
}

TEST(HttpServer, AddressInUseIsAClearError) {
  HttpServer first("127.0.0.1", 0, [](const std::string&) { return HttpResponse{}; });
  try {
    HttpServer second("127.0.0.1", first.port(), [](const std::string&) { return HttpResponse{}; });
    FAIL() << "bound the same port twice";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("Address already in use"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vigil::agent
