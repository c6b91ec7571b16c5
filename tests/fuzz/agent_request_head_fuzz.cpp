// libFuzzer target: the head of a request any client of the agent's endpoint sends. Finding the
// end of the head must not depend on how the bytes arrived (whole, or in two pieces resumed where
// the first search stopped), a found end lies inside the input, and a parsed head is either ok
// with a method and a path without its query, or refused with a reason (Beast's parser checks the
// syntax).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "export/request_head.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t whole = vigil::agent::request_head_end(bytes, 0);
  // The same bytes read in two pieces: the first search stops at the piece's end.
  const size_t cut = data[0] % (bytes.size() + 1);
  size_t pieces = vigil::agent::request_head_end(bytes.substr(0, cut), 0);
  if (pieces == std::string_view::npos) pieces = vigil::agent::request_head_end(bytes, cut);
  if (whole != pieces) std::abort();
  if (whole == std::string_view::npos) return 0;
  if (whole > bytes.size()) std::abort();
  const auto head = vigil::agent::parse_request_head(bytes.substr(0, whole));
  if (head.ok && (head.method.empty() || head.path.find('?') != std::string::npos)) std::abort();
  if (!head.ok && head.error.empty()) std::abort();
  return 0;
}
