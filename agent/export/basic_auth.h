// HTTP basic authentication against a web config's basic_auth_users (bcrypt hashes), checked by
// the system's libcrypt. bcrypt is slow by design (tens of ms at cost 10), so verdicts are cached
// as exporter-toolkit caches them (web/cache.go) and the check itself belongs off the I/O thread.
// Unlike exporter-toolkit's cache (cleared whole when full), successes and failures are kept apart
// and each evicts its own oldest entry: a flood of wrong passwords never evicts the scraper's.
#pragma once

#include <array>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
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
  BasicAuth();
  std::optional<bool> cached(const Users& users, const std::string& authorization);
  // Runs bcrypt (slow) and caches the verdict. An unknown user is checked against a fixed hash
  // so the answer's timing does not tell which users exist (as exporter-toolkit does).
  bool check(const Users& users, const std::string& authorization);

 private:
  struct Credentials {
    std::string user;
    std::string password;
  };
  // HMAC-SHA-256 of user, hash and password under a key drawn at start and never stored: no
  // plaintext is kept, and a memory dump of the cache is no faster an oracle than bcrypt itself.
  using Digest = std::array<unsigned char, 32>;

  // Verdicts of one kind, at most kCacheSize, the oldest evicted first.
  class Verdicts {
   public:
    bool contains(const Digest& d) const { return keys_.count(d) != 0; }
    void add(const Digest& d);

   private:
    std::set<Digest> keys_;
    std::deque<Digest> order_;  // oldest first
  };

  static std::optional<Credentials> decode(const std::string& authorization);
  Digest cache_key(const std::string& user, const std::string& hash, const std::string& password) const;

  static constexpr size_t kCacheSize = 100;  // exporter-toolkit's cacheSize, for each kind
  std::array<unsigned char, 32> key_{};
  std::mutex mu_;
  Verdicts good_;
  Verdicts bad_;
};

}  // namespace vigil::agent
