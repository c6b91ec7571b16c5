// libFuzzer target: the agent's --web.config.file parser (exporter-toolkit's format) on arbitrary
// text either throws ConfigKeyError with a message, or returns a config that keeps the promises
// the endpoint relies on: TLS on has a certificate and a key, a verifying policy has its CA, the
// versions are TLS 1.0-1.3 in order, headers are exporter-toolkit's five with a value and no line
// break, every user has a bcrypt hash. The parser touches no file (the TLS context reads them), so
// the paths an input names are never opened; the base directory only prefixes relative paths:
// parsed without one, the config is the same but for those prefixes. Any other exception escapes,
// terminates and is reported as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "export/web_config.h"

namespace {

// Not opened: any absolute directory would do.
const std::string kDir = "/nonexistent/vigil-fuzz";

bool bcrypt_shaped(const std::string& h) {
  return h.size() == 60 && h[0] == '$' && h[1] == '2' && (h[2] == 'a' || h[2] == 'b' || h[2] == 'y') && h[3] == '$';
}

void check_promises(const vigil::agent::WebConfig& c) {
  const vigil::agent::TlsServerConfig& t = c.tls;
  if (t.enabled()) {
    if (t.cert_file.empty() || t.key_file.empty()) std::abort();
    if (t.min_version < 0x0301 || t.max_version > 0x0304 || t.min_version > t.max_version) std::abort();
    if (!t.client_ca_file.empty() && t.client_auth == vigil::agent::ClientAuth::kNoClientCert) std::abort();
    if (t.client_ca_file.empty() && (t.client_auth == vigil::agent::ClientAuth::kVerifyClientCertIfGiven ||
                                     t.client_auth == vigil::agent::ClientAuth::kRequireAndVerifyClientCert))
      std::abort();
  }
  for (const auto& [name, value] : c.headers) {
    if (name != "Strict-Transport-Security" && name != "X-Content-Type-Options" && name != "X-Frame-Options" &&
        name != "X-XSS-Protection" && name != "Content-Security-Policy")
      std::abort();
    if (value.empty() || value.find_first_of("\r\n") != std::string::npos) std::abort();
  }
  for (const auto& [user, hash] : c.users)
    if (!bcrypt_shaped(hash)) std::abort();
}

// `path` as parse_web_config with kDir made it from `bare`, the path it read.
void check_joined(const std::string& bare, const std::string& path) {
  if (bare.empty() || bare[0] == '/') {
    if (path != bare) std::abort();
  } else if (path != kDir + "/" + bare) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  vigil::agent::WebConfig in_dir;
  try {
    in_dir = vigil::agent::parse_web_config(text, kDir);
  } catch (const vigil::ConfigKeyError& e) {
    if (std::string(e.what()).empty() || e.line() < 0) std::abort();
    // The directory does not decide whether a file is good.
    try {
      vigil::agent::parse_web_config(text, "");
    } catch (const vigil::ConfigKeyError&) {
      return 0;
    }
    std::abort();
  }
  check_promises(in_dir);
  const vigil::agent::WebConfig bare = vigil::agent::parse_web_config(text, "");  // throwing here: a crash
  const vigil::agent::TlsServerConfig& a = in_dir.tls;
  const vigil::agent::TlsServerConfig& b = bare.tls;
  if (a.enabled() != b.enabled()) std::abort();
  if (a.enabled()) {
    check_joined(b.cert_file, a.cert_file);
    check_joined(b.key_file, a.key_file);
    check_joined(b.client_ca_file, a.client_ca_file);
  }
  if (a.client_auth != b.client_auth || a.min_version != b.min_version || a.max_version != b.max_version ||
      a.cipher_suites != b.cipher_suites || a.prefer_server_cipher_suites != b.prefer_server_cipher_suites ||
      in_dir.headers != bare.headers || in_dir.users != bare.users)
    std::abort();
  return 0;
}
