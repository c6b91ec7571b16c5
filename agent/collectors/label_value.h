// Label values Prometheus accepts: its text parser refuses a scrape with a label value that is not
// valid UTF-8, and process and pod names are whatever a workload chose.
#pragma once

#include <string>
#include <string_view>

namespace vigil::agent {

// TEXT with each byte that is not part of a well-formed UTF-8 sequence (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF) replaced by U+FFFD.
std::string valid_utf8(std::string_view text);

}  // namespace vigil::agent
