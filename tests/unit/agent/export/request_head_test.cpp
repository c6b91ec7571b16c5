// Request heads: where they end (CRLF or bare LF blank line, found when read piecewise) and what
// Beast's parser accepts.
#include "export/request_head.h"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

TEST(RequestHead, EndIsFoundAcrossReads) {
  std::string head = "GET / HTTP/1.1\r\nHost: a\r\n\r\nextra";
  EXPECT_EQ(request_head_end(head.substr(0, 10), 0), std::string::npos);
  EXPECT_EQ(request_head_end(head.substr(0, 26), 10), std::string::npos);
  EXPECT_EQ(request_head_end(head, 26), 27u);  // the blank line split across reads
  EXPECT_EQ(request_head_end("GET / HTTP/1.0\n\n", 0), 16u);
}

TEST(RequestHead, SplitsMethodAndPathWithoutQuery) {
  RequestHead h = parse_request_head("GET /metrics?name[]=x HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_TRUE(h.ok) << h.error;
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.path, "/metrics");
  EXPECT_TRUE(parse_request_head("GET /healthz HTTP/1.0\r\n\r\n").ok);
}

TEST(RequestHead, RefusesWhatIsNotHttp) {
  EXPECT_FALSE(parse_request_head("GARBAGE\r\n\r\n").ok);
  EXPECT_FALSE(parse_request_head("GET /metrics HTTP/1.1\r\nBad Field: x\r\n\r\n").ok);
  EXPECT_FALSE(parse_request_head("GET /metrics HTTP/9.9\r\n\r\n").ok);
  EXPECT_FALSE(parse_request_head("GET / HTTP/1.0\n\n").ok);  // bare LF
  EXPECT_FALSE(parse_request_head(std::string("GET /\0 HTTP/1.1\r\n\r\n", 19)).ok);
}

}  // namespace
}  // namespace vigil::agent
