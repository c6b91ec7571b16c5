// HTTP basic authentication against a web config's basic_auth_users (bcrypt hashes), checked by
// the system's libcrypt. bcrypt is slow by design (tens of ms at cost 10), so verdicts are cached
// as exporter-toolkit caches them (web/cache.go) and the check itself belongs off the I/O thread.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace vigil::agent {

// True when `password` hashes to `hash` (crypt(3) format, e.g. $2b$/$2y$ bcrypt) under libcrypt;
// the computed hash is compared in time independent of where it differs.
bool crypt_matches(const std::string& password, const std::string& hash);

class BasicAuth {
 public:
  using Users = std::map<std::string, std::string>;  // user -> bcrypt hash

  // The verdict for an Authorization header value when it is known without bcrypt: false for no
  // or malformed Basic credentials, the cached verdict for credentials seen before, nullopt when
  // check() must run.
  std::optional<bool> cached(const Users& users, const std::string& authorization);
  // Runs bcrypt (slow) and caches the verdict. An unknown user is checked against a fixed hash
  // so the answer's timing does not tell which users exist (as exporter-toolkit does).
  bool check(const Users& users, const std::string& authorization);

 private:
  struct Credentials {
    std::string user;
    std::string password;
  };
  using Digest = std::array<unsigned char, 32>;  // SHA-256 of user, hash and password: no plaintext kept

  static std::optional<Credentials> decode(const std::string& authorization);
  static Digest cache_key(const std::string& user, const std::string& hash, const std::string& password);

  static constexpr size_t kCacheSize = 100;  // exporter-toolkit's cacheSize
  std::mutex mu_;
  std::map<Digest, bool> verdicts_;
};

}  // namespace vigil::agent
