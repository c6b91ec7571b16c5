// Parses the head of an HTTP/1.x request (request line and header fields) the endpoint has read
// whole: what a client controls, kept apart from the socket so it can be tested and fuzzed alone.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace vigil::agent {

struct RequestHead {
  bool ok = false;     // false: not a valid HTTP/1.x request head (answered 400)
  std::string error;   // why not, when !ok
  std::string method;
  std::string path;    // the target without its query
  std::string authorization;  // the Authorization field's value, "" when absent
};

// Where the head in `bytes` ends (one past its blank line), or npos while it is incomplete.
// `from`: how many bytes were already searched, so a head read piecewise is scanned once.
size_t request_head_end(std::string_view bytes, size_t from);

// Checks and splits a complete head (bytes up to request_head_end).
RequestHead parse_request_head(std::string_view head);

}  // namespace vigil::agent
