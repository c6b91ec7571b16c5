// --web.config.file: exporter-toolkit's format read strictly (unknown keys, refused headers and
// bad values named), the TLS context refusing files it cannot use, and basic auth checked by
// libcrypt against bcrypt hashes published by exporter-toolkit (web/testdata/
// web_config_users.good.yml with the passwords of web/tls_config_test.go and web/handler_test.go).
#include "export/web_config.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "export/basic_auth.h"
#include "export/tls_context.h"
#include "export/web_config_watch.h"

namespace vigil::agent {
namespace {

// Published by exporter-toolkit: dave's password is dave123, alice's alice123.
constexpr const char* kDaveHash = "$2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq";
constexpr const char* kAliceHash = "$2y$12$1DpfPeqF9HzHJt.EWswy1exHluGfbhnn3yXhR7Xes6m3WJqFg0Wby";

// The key a parse fails on, or "" when it parses.
std::string error_key(const std::string& yaml) {
  try {
    parse_web_config(yaml, "/etc/vigil");
  } catch (const ConfigKeyError& e) {
    return e.key() + ": " + e.what();
  }
  return "";
}

TEST(WebConfigTest, ReadsEveryImplementedKey) {
  WebConfig c = parse_web_config(R"(
tls_server_config:
  cert_file: server.crt
  key_file: /abs/server.key
  client_ca_file: ca.crt
  client_auth_type: RequireAndVerifyClientCert
  min_version: TLS13
  max_version: TLS13
  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]
  prefer_server_cipher_suites: false
http_server_config:
  http2: false
  headers:
    X-Frame-Options: deny
    Strict-Transport-Security: max-age=31536000
    X-XSS-Protection: ""
basic_auth_users:
  dave: $2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq
)",
                                 "/etc/vigil");
  EXPECT_TRUE(c.tls.enabled());
  EXPECT_EQ(c.tls.cert_file, "/etc/vigil/server.crt");  // relative to the config's directory
  EXPECT_EQ(c.tls.key_file, "/abs/server.key");
  EXPECT_EQ(c.tls.client_ca_file, "/etc/vigil/ca.crt");
  EXPECT_EQ(c.tls.client_auth, ClientAuth::kRequireAndVerifyClientCert);
  EXPECT_EQ(c.tls.min_version, 0x0304);
  EXPECT_FALSE(c.tls.prefer_server_cipher_suites);
  ASSERT_EQ(c.headers.size(), 2u);  // a blank value leaves the header unset, as upstream
  EXPECT_EQ(c.headers[0].first, "X-Frame-Options");
  EXPECT_EQ(c.users.at("dave"), kDaveHash);
}

TEST(WebConfigTest, EmptyFileAndUsersOnlyServePlainHttp) {
  EXPECT_FALSE(parse_web_config("", ".").tls.enabled());
  WebConfig c = parse_web_config(std::string("basic_auth_users:\n  alice: ") + kAliceHash + "\n", ".");
  EXPECT_FALSE(c.tls.enabled());
  EXPECT_EQ(c.users.size(), 1u);
}

TEST(WebConfigTest, UnknownKeysAreNamed) {
  EXPECT_EQ(error_key("tls_server_config:\n  cert_fil: a\n"), "tls_server_config.cert_fil: unknown key");
  EXPECT_EQ(error_key("basic_auth:\n  a: b\n"), "basic_auth: unknown key");
  EXPECT_EQ(error_key("http_server_config:\n  header: {}\n"), "http_server_config.header: unknown key");
}

TEST(WebConfigTest, BadValuesAreNamed) {
  EXPECT_NE(error_key("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireClientCerts\n")
                .find("tls_server_config.client_auth_type: expected NoClientCert"),
            std::string::npos);
  EXPECT_NE(error_key("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS14\n")
                .find("tls_server_config.min_version"),
            std::string::npos);
  EXPECT_NE(error_key("tls_server_config:\n  cert_file: a\n").find("tls_server_config.key_file: missing"),
            std::string::npos);
  EXPECT_NE(error_key("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n")
                .find("without a Client Auth Policy"),
            std::string::npos);
  EXPECT_NE(error_key("basic_auth_users:\n  alice: alice123\n").find("basic_auth_users.alice: expected a bcrypt hash"),
            std::string::npos);
}

TEST(WebConfigTest, RefusesTheHeadersExporterToolkitRefuses) {
  EXPECT_NE(error_key("http_server_config:\n  headers:\n    Server: vigil\n")
                .find("http_server_config.headers.Server: HTTP header 'Server' can not be configured"),
            std::string::npos);
  EXPECT_NE(error_key("http_server_config:\n  headers:\n    X-Frame-Options: allow\n").find("expected one of deny, sameorigin"),
            std::string::npos);
  EXPECT_NE(error_key("http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n").find("nosniff"),
            std::string::npos);
}

TEST(WebConfigTest, KeysNotImplementedAreRefusedByName) {
  EXPECT_NE(error_key("rate_limit:\n  interval: 1s\n").find("rate_limit: exporter-toolkit has this key"),
            std::string::npos);
  EXPECT_NE(error_key("tls_server_config:\n  client_allowed_sans: [a]\n").find("client_allowed_sans"),
            std::string::npos);
}

// Certificates made by the openssl command-line tool, in a directory of the test's own.
class TlsFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("vigil-web-config-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    for (const char* name : {"server", "other"}) {
      std::string cmd = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=" +
                        std::string(name) + " -keyout " + path(name) + ".key -out " + path(name) + ".crt 2>/dev/null";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string context_error(const TlsServerConfig& tls) {
    try {
      make_tls_context(tls);
    } catch (const ConfigKeyError& e) {
      return e.key() + ": " + e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

TEST_F(TlsFiles, LoadsAGoodPairAndNamesTheFileThatFails) {
  TlsServerConfig tls;
  tls.cert_file = path("server.crt");
  tls.key_file = path("server.key");
  EXPECT_EQ(context_error(tls), "");
  tls.client_ca_file = path("other.crt");
  tls.client_auth = ClientAuth::kRequireAndVerifyClientCert;
  EXPECT_EQ(context_error(tls), "");

  tls.key_file = path("missing.key");
  EXPECT_NE(context_error(tls).find("tls_server_config.key_file: cannot read '" + path("missing.key") +
                                    "': No such file or directory"),
            std::string::npos);
  tls.key_file = path("other.key");  // OpenSSL compares the key with the certificate loaded before it
  EXPECT_EQ(context_error(tls), "tls_server_config.key_file: cannot use '" + path("other.key") + "': key values mismatch");
  tls.key_file = path("server.key");
  tls.client_ca_file = path("server.key");  // a key is no CA certificate
  EXPECT_NE(context_error(tls).find("tls_server_config.client_ca_file: cannot use"), std::string::npos);
  tls.client_ca_file = path("other.crt");
  tls.cipher_suites = {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"};
  EXPECT_EQ(context_error(tls), "");
  tls.cipher_suites = {"TLS_INVENTED_WITH_ROT13"};
  EXPECT_EQ(context_error(tls), "tls_server_config.cipher_suites: unknown cipher: TLS_INVENTED_WITH_ROT13");
}

TEST_F(TlsFiles, ReloadsWhenAFileChangesAndKeepsTheLastGoodConfig) {
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(path(name + ".tmp")) << text;
    std::filesystem::rename(path(name + ".tmp"), path(name));  // replaced whole, as a Secret update
  };
  auto copy = [&](const std::string& from, const std::string& to) {
    std::filesystem::copy_file(path(from), path(to + ".tmp"), std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(path(to + ".tmp"), path(to));
  };
  copy("server.crt", "tls.crt");
  copy("server.key", "tls.key");
  write("web.yml", "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n");
  HttpStats stats;
  WebConfigWatch watch(path("web.yml"), stats);
  auto first = watch.current();
  ASSERT_TRUE(first->tls);
  EXPECT_EQ(watch.current(), first) << "reloaded with nothing changed";

  copy("other.key", "tls.key");  // a rotation half done: the new key, the old certificate
  EXPECT_EQ(watch.current(), first) << "a key that does not match replaced the pair in service";
  EXPECT_EQ(stats.web_config_reloads(false), 1u);
  EXPECT_FALSE(stats.web_config_last_reload_ok());
  EXPECT_EQ(watch.current(), first);
  EXPECT_EQ(stats.web_config_reloads(false), 1u) << "retried with nothing changed since the failure";

  copy("other.crt", "tls.crt");  // the rotation completed
  auto rotated = watch.current();
  EXPECT_NE(rotated, first);
  EXPECT_EQ(stats.web_config_reloads(true), 2u);  // the first load and this one
  EXPECT_TRUE(stats.web_config_last_reload_ok());

  write("web.yml", "tls_server_config:\n  cert_file: tls.crt\n  key_fil: tls.key\n");
  EXPECT_EQ(watch.current(), rotated);
  EXPECT_EQ(stats.web_config_reloads(false), 2u);
  write("web.yml", "basic_auth_users:\n  dave: " + std::string(kDaveHash) + "\n");
  EXPECT_EQ(watch.current(), rotated) << "TLS turned off without a restart";
  EXPECT_EQ(stats.web_config_reloads(false), 3u);
  write("web.yml", "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"
                   "basic_auth_users:\n  dave: " + std::string(kDaveHash) + "\n");
  EXPECT_EQ(watch.current()->config.users.size(), 1u);
  EXPECT_EQ(stats.web_config_reloads(true), 3u);
}

TEST(BasicAuthTest, LibcryptVerifiesPublishedBcryptHashes) {
  EXPECT_TRUE(crypt_matches("dave123", kDaveHash));
  EXPECT_FALSE(crypt_matches("dave1234", kDaveHash));
  EXPECT_FALSE(crypt_matches("dave12", kDaveHash));
  EXPECT_TRUE(crypt_matches("alice123", kAliceHash));
  EXPECT_FALSE(crypt_matches("alice123", std::string(kAliceHash).substr(0, 40)));  // a cut hash never matches
}

TEST(BasicAuthTest, ChecksTheAuthorizationHeaderAndCachesTheVerdict) {
  BasicAuth auth;
  BasicAuth::Users users = {{"dave", kDaveHash}};
  // base64("dave:dave123") and base64("dave:dave1234"), from Python's base64 module.
  const std::string right = "Basic ZGF2ZTpkYXZlMTIz";
  const std::string wrong = "Basic ZGF2ZTpkYXZlMTIzNA==";
  EXPECT_EQ(auth.cached(users, right), std::nullopt);  // not yet known: bcrypt must run
  EXPECT_TRUE(auth.check(users, right));
  EXPECT_EQ(auth.cached(users, right), std::optional<bool>(true));
  EXPECT_FALSE(auth.check(users, wrong));
  EXPECT_EQ(auth.cached(users, wrong), std::optional<bool>(false));
  // base64("eve:dave123"): an unknown user is refused even with a known password.
  EXPECT_FALSE(auth.check(users, "Basic ZXZlOmRhdmUxMjM="));
  EXPECT_EQ(auth.cached(users, ""), std::optional<bool>(false));
  EXPECT_EQ(auth.cached(users, "Bearer ZGF2ZTpkYXZlMTIz"), std::optional<bool>(false));
  EXPECT_EQ(auth.cached(users, "Basic !!!!"), std::optional<bool>(false));
  // The same credentials under a changed hash (a reloaded config) are not taken from the cache.
  BasicAuth::Users rotated = {{"dave", kAliceHash}};
  EXPECT_EQ(auth.cached(rotated, right), std::nullopt);
  EXPECT_FALSE(auth.check(rotated, right));
}

std::string basic(const std::string& user_password) {
  std::string out(4 * ((user_password.size() + 2) / 3), '\0');
  EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(user_password.data()),
                  static_cast<int>(user_password.size()));
  return "Basic " + out;
}

// Wrong passwords by the hundred evict only older wrong ones: the right one stays cached (before,
// every 100 distinct failures cleared the whole cache, the scraper's verdict with it).
TEST(BasicAuthTest, AFloodOfWrongPasswordsKeepsTheRightOneCached) {
  BasicAuth auth;
  // bcrypt of "flood-ok" at cost 4 (Python's crypt module): cheap enough for 300 checks.
  BasicAuth::Users users = {{"dave", "$2b$04$X.w/QvK.1lYs8vxKLcLNQuXneiH4fm2S9xLj6Jxs5Loktll97br0G"}};
  const std::string right = basic("dave:flood-ok");
  ASSERT_EQ(right, "Basic ZGF2ZTpmbG9vZC1vaw==");  // Python's base64 of the same
  EXPECT_TRUE(auth.check(users, right));
  for (int i = 0; i < 300; ++i) EXPECT_FALSE(auth.check(users, basic("dave:wrong-" + std::to_string(i))));
  EXPECT_EQ(auth.cached(users, right), std::optional<bool>(true));
  EXPECT_EQ(auth.cached(users, basic("dave:wrong-299")), std::optional<bool>(false));
  EXPECT_EQ(auth.cached(users, basic("dave:wrong-200")), std::optional<bool>(false));  // the 100 newest
  EXPECT_EQ(auth.cached(users, basic("dave:wrong-199")), std::nullopt);               // evicted, one by one
  EXPECT_EQ(auth.cached(users, basic("dave:wrong-0")), std::nullopt);
}

}  // namespace
}  // namespace vigil::agent
