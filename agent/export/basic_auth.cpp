// RFC 7617 credentials: "Basic " and base64 of "user:password" (decoded by OpenSSL); the password
// is checked with crypt_rn (libxcrypt, which implements bcrypt's $2a$/$2b$/$2y$).
#include "export/basic_auth.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <strings.h>

namespace vigil::agent {
namespace {

// web/handler.go: bcrypt of "fakepassword", checked for unknown users so they take as long.
constexpr const char* kUnknownUserHash = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

}  // namespace

bool crypt_matches(const std::string& password, const std::string& hash) {
  auto data = std::make_unique<crypt_data>();  // ~32 KiB: not on the stack
  const char* out = crypt_rn(password.c_str(), hash.c_str(), data.get(), sizeof *data);
  if (out == nullptr) return false;
  size_t n = std::strlen(out);
  return n == hash.size() && CRYPTO_memcmp(out, hash.data(), n) == 0;
}

std::optional<BasicAuth::Credentials> BasicAuth::decode(const std::string& authorization) {
  constexpr std::string_view kScheme = "basic ";
  if (authorization.size() <= kScheme.size() || strncasecmp(authorization.c_str(), kScheme.data(), kScheme.size()) != 0)
    return std::nullopt;
  std::string b64 = authorization.substr(kScheme.size());
  while (!b64.empty() && b64.front() == ' ') b64.erase(0, 1);
  if (b64.empty() || b64.size() % 4 != 0 || b64.size() > 4096) return std::nullopt;
  std::string raw(b64.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(raw.data()), reinterpret_cast<const unsigned char*>(b64.data()),
                          static_cast<int>(b64.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the bytes the padding stands for; they are not the credentials'.
  size_t padding = b64.size() - b64.find_last_not_of('=') - 1;
  if (padding > 2) return std::nullopt;
  raw.resize(static_cast<size_t>(n) - padding);
  size_t colon = raw.find(':');
  if (colon == std::string::npos) return std::nullopt;
  return Credentials{raw.substr(0, colon), raw.substr(colon + 1)};
}

BasicAuth::BasicAuth() {
  if (RAND_bytes(key_.data(), static_cast<int>(key_.size())) != 1)
    throw std::runtime_error("basic auth: no random bytes for the verdict cache's key (RAND_bytes)");
}

void BasicAuth::Verdicts::add(const Digest& d) {
  if (!keys_.insert(d).second) return;
  order_.push_back(d);
  if (order_.size() > kCacheSize) {
    keys_.erase(order_.front());
    order_.pop_front();
  }
}

BasicAuth::Digest BasicAuth::cache_key(const std::string& user, const std::string& hash,
                                       const std::string& password) const {
  std::string material;
  for (const std::string* part : {&user, &hash, &password}) {
    material += std::to_string(part->size()) + ":";  // length-prefixed: no two triples share bytes
    material += *part;
  }
  Digest d{};
  unsigned int n = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()), reinterpret_cast<const unsigned char*>(material.data()),
       material.size(), d.data(), &n);
  OPENSSL_cleanse(material.data(), material.size());
  return d;
}

std::optional<bool> BasicAuth::cached(const Users& users, const std::string& authorization) {
  auto credentials = decode(authorization);
  if (!credentials) return false;
  auto user = users.find(credentials->user);
  const std::string& hash = user == users.end() ? std::string(kUnknownUserHash) : user->second;
  Digest key = cache_key(credentials->user, hash, credentials->password);
  std::lock_guard lock(mu_);
  if (good_.contains(key)) return true;
  if (bad_.contains(key)) return false;
  return std::nullopt;
}

bool BasicAuth::check(const Users& users, const std::string& authorization) {
  auto credentials = decode(authorization);
  if (!credentials) return false;
  auto user = users.find(credentials->user);
  const bool known = user != users.end();
  const std::string hash = known ? user->second : std::string(kUnknownUserHash);
  const bool ok = crypt_matches(credentials->password, hash) && known;
  Digest key = cache_key(credentials->user, hash, credentials->password);
  std::lock_guard lock(mu_);
  (ok ? good_ : bad_).add(key);
  return ok;
}

}  // namespace vigil::agent
