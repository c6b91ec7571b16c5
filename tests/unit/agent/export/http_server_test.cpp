// The agent's HTTP server: routes GET paths, refuses other methods, malformed and oversized
// heads, and no client can hold it: slow clients are cut at the deadline or at the cap while
// others are answered, and a slow render does not hold an inline route.
#include "export/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace vigil::agent {
namespace {

using namespace std::chrono_literals;

int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Everything the server sends until it closes (or `wait` passes).
std::string read_all(int fd, std::chrono::milliseconds wait = 5s) {
  std::string out;
  char buf[4096];
  auto end = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) != 1) continue;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string exchange(int port, const std::string& request) {
  int fd = connect_to(port);
  if (fd < 0) return "connect failed";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out = read_all(fd);
  close(fd);
  return out;
}

bool closed_by_server(int fd, std::chrono::milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(wait.count())) != 1) return false;
  char c;
  return recv(fd, &c, 1, MSG_PEEK) <= 0 || read_all(fd, 200ms).rfind("HTTP/1.1 408", 0) == 0;
}

std::vector<HttpRoute> routes() {
  return {{"/metrics", false, [] { return HttpResponse{200, "text/plain", "up 1\n"}; }},
          {"/healthz", true, [] { return HttpResponse{200, "text/plain", "ok\n"}; }}};
}

class HttpServerTest : public ::testing::Test {
 protected:
  HttpStats stats;
  HttpServer server{"127.0.0.1", 0, routes(), stats};
};

TEST_F(HttpServerTest, ServesGetWithLengthAndClose) {
  std::string r = exchange(server.port(), "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Length: 5\r\n"), std::string::npos);
  EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(r.substr(r.size() - 5), "up 1\n");
  EXPECT_EQ(stats.answers(0), 1u);  // code 200
}

TEST_F(HttpServerTest, UnknownPathIs404NamingThePaths) {
  std::string r = exchange(server.port(), "GET /nope HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404", 0), 0u) << r;
  EXPECT_NE(r.find("try /metrics, /healthz"), std::string::npos) << r;
}

TEST_F(HttpServerTest, RefusesOtherMethodsAndGarbage) {
  std::string post = exchange(server.port(), "POST /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(post.rfind("HTTP/1.1 405", 0), 0u) << post;
  EXPECT_NE(post.find("Allow: GET\r\n"), std::string::npos) << post;
  EXPECT_EQ(exchange(server.port(), "GARBAGE\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(exchange(server.port(), "GET /metrics HTTP/1.1\r\nBad Field: x\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(stats.rejections(HttpRejection::kBadRequest), 2u);
}

TEST_F(HttpServerTest, OversizedHeadIs431AndServingContinues) {
  std::string huge = "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n";
  std::string r = exchange(server.port(), huge);
  EXPECT_EQ(r.rfind("HTTP/1.1 431", 0), 0u) << r.substr(0, 80);
  EXPECT_EQ(stats.rejections(HttpRejection::kTooLarge), 1u);
  EXPECT_EQ(exchange(server.port(), "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
}

TEST(HttpServer, AddressInUseIsAClearError) {
  HttpStats stats;
  HttpServer first("127.0.0.1", 0, routes(), stats);
  try {
    HttpServer second("127.0.0.1", first.port(), routes(), stats);
    FAIL() << "bound the same port twice";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("Address already in use"), std::string::npos) << e.what();
  }
}

TEST(HttpServer, TricklingClientsDoNotHoldOthersAndAreCutAtTheDeadline) {
  HttpStats stats;
  HttpServer server("127.0.0.1", 0, routes(), stats, {500ms, 8192, 64});
  std::vector<int> slow;
  for (int i = 0; i < 10; ++i) {
    slow.push_back(connect_to(server.port()));
    send(slow.back(), "GET /met", 8, MSG_NOSIGNAL);
  }
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(exchange(server.port(), "GET /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 200ms) << "answered behind the slow clients";
  for (int fd : slow) {
    std::string r = read_all(fd, 2s);
    EXPECT_EQ(r.rfind("HTTP/1.1 408", 0), 0u) << r;
    close(fd);
  }
  EXPECT_EQ(stats.rejections(HttpRejection::kDeadline), 10u);
  EXPECT_EQ(stats.answers(std::find(kHttpStatusCodes.begin(), kHttpStatusCodes.end(), 408) - kHttpStatusCodes.begin()),
            10u);
  // The server closes each socket before its connection's bookkeeping ends: on a loaded machine
  // the count reaches 0 a moment after the clients saw EOF.
  auto deadline = std::chrono::steady_clock::now() + 2s;
  while (stats.open_connections() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(stats.open_connections(), 0);
}

TEST(HttpServer, AtTheCapTheOldestSilentConnectionMakesRoom) {
  HttpStats stats;
  HttpServer server("127.0.0.1", 0, routes(), stats, {10s, 8192, 4});
  std::vector<int> silent;
  for (int i = 0; i < 4; ++i) {
    silent.push_back(connect_to(server.port()));
    std::this_thread::sleep_for(20ms);  // accepted in this order
  }
  for (int i = 0; i < 3; ++i) {
    // At the cap: the probe takes the slot of the oldest silent connection ...
    EXPECT_EQ(exchange(server.port(), "GET /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
    std::this_thread::sleep_for(50ms);
    // ... and once it is gone, a new silent one fills the cap again.
    silent.push_back(connect_to(server.port()));
    std::this_thread::sleep_for(20ms);
  }
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(closed_by_server(silent[i], 1s)) << "silent connection " << i;
  for (size_t i = 3; i < silent.size(); ++i) EXPECT_FALSE(closed_by_server(silent[i], 100ms)) << i;
  EXPECT_EQ(stats.rejections(HttpRejection::kCap), 3u);
  EXPECT_LE(stats.open_connections(), 4);
  for (int fd : silent) close(fd);
}

TEST(HttpServer, ASlowRenderDoesNotHoldInlineRoutesAndIsShared) {
  HttpStats stats;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> renders{0};
  HttpServer server("127.0.0.1", 0,
                    {{"/metrics", false, [&] {
                        ++renders;
                        released.wait();
                        return HttpResponse{200, "text/plain", "up 1\n"};
                      }},
                     {"/healthz", true, [] { return HttpResponse{200, "text/plain", "ok\n"}; }}},
                    stats);
  auto first = std::async(std::launch::async, [&] { return exchange(server.port(), "GET /metrics HTTP/1.1\r\n\r\n"); });
  while (renders.load() == 0) std::this_thread::sleep_for(5ms);
  // Three more scrapes arrive while the first render runs: they share one render after it.
  std::vector<std::future<std::string>> more;
  for (int i = 0; i < 3; ++i)
    more.push_back(std::async(std::launch::async, [&] { return exchange(server.port(), "GET /metrics HTTP/1.1\r\n\r\n"); }));
  std::this_thread::sleep_for(100ms);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(exchange(server.port(), "GET /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 200ms);
  release.set_value();
  EXPECT_EQ(first.get().rfind("HTTP/1.1 200", 0), 0u);
  for (auto& f : more) EXPECT_EQ(f.get().rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(renders.load(), 2);
}

}  // namespace
}  // namespace vigil::agent
