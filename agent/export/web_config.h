// The agent's --web.config.file: exporter-toolkit's web configuration (the format node_exporter
// and other Prometheus exporters share; docs/deploy.md, "TLS and basic auth on the agent"), read
// strictly: an unknown key, a header exporter-toolkit refuses or a value it would not take is an
// error naming the key. Parsing touches no file; the TLS context reads the files (tls_context.h).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/config_key_error.h"

namespace vigil::agent {

// crypto/tls's ClientAuthType under exporter-toolkit's names.
enum class ClientAuth {
  kNoClientCert,
  kRequestClientCert,           // asked for, not verified, not required
  kRequireAnyClientCert,        // required, not verified
  kVerifyClientCertIfGiven,     // verified when given
  kRequireAndVerifyClientCert,  // required and verified: the one that authenticates clients
};

struct TlsServerConfig {
  std::string cert_file;       // paths relative to the web config's directory, as exporter-toolkit
  std::string key_file;
  std::string client_ca_file;
  ClientAuth client_auth = ClientAuth::kNoClientCert;
  int min_version = 0x0303;    // TLS 1.2 (OpenSSL's TLS1_2_VERSION)
  int max_version = 0x0304;    // TLS 1.3
  std::vector<std::string> cipher_suites;  // IANA names (Go's crypto/tls names), TLS 1.2 and lower
  bool prefer_server_cipher_suites = true;
  bool client_auth_set = false;  // client_auth_type was written, even as NoClientCert

  // exporter-toolkit's TLSConfig.IsEnabled: any TLS field set turns TLS on.
  bool enabled() const {
    return !cert_file.empty() || !key_file.empty() || !client_ca_file.empty() || client_auth_set;
  }
};

struct WebConfig {
  TlsServerConfig tls;
  std::vector<std::pair<std::string, std::string>> headers;  // added to every answer
  std::map<std::string, std::string> users;                 // user -> bcrypt hash; empty: no basic auth
};

// Parses the file's text; relative paths are taken from `config_dir`. Throws ConfigKeyError.
WebConfig parse_web_config(const std::string& yaml_text, const std::string& config_dir);
// Reads and parses PATH; throws ConfigKeyError (key "file" when it cannot be read).
WebConfig load_web_config(const std::string& path);

}  // namespace vigil::agent
