// The bearer-token check behind ApiAccess::api_key.
#include "server/api_access.h"

namespace vigil {

bool bearer_matches(std::string_view authorization, std::string_view key) {
  constexpr std::string_view kScheme = "Bearer ";
  if (key.empty() || authorization.size() < kScheme.size()) return false;
  // RFC 7235: the scheme name is case-insensitive.
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (lower(authorization[i]) != lower(kScheme[i])) return false;
  const std::string_view presented = authorization.substr(kScheme.size());
  // Every byte of the key is visited whatever the presented token holds; no early exit.
  unsigned diff = presented.size() == key.size() ? 0u : 1u;
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char p = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    diff |= p ^ static_cast<unsigned char>(key[i]);
  }
  return diff == 0;
}

}  // namespace vigil
