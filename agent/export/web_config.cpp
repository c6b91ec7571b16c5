// exporter-toolkit's web configuration (github.com/prometheus/exporter-toolkit, web/tls_config.go
// Config/TLSConfig/getConfig, web/handler.go extraHTTPHeaders), read as its yaml.UnmarshalStrict
// does: unknown keys are errors. Keys exporter-toolkit has that this agent does not implement are
// refused by name rather than ignored, so a file never means less here than it says.
#include "export/web_config.h"

#include <algorithm>
#include <regex>

#include "common/yaml_fields.h"

namespace vigil::agent {
namespace {

namespace yf = vigil::yaml_fields;

// web/handler.go extraHTTPHeaders: the headers a web config may set, and for some the only values.
const std::map<std::string, std::vector<std::string>>& allowed_headers() {
  static const std::map<std::string, std::vector<std::string>> headers = {
      {"Strict-Transport-Security", {}},
      {"X-Content-Type-Options", {"nosniff"}},
      {"X-Frame-Options", {"deny", "sameorigin"}},
      {"X-XSS-Protection", {}},
      {"Content-Security-Policy", {}},
  };
  return headers;
}

ClientAuth client_auth(const std::string& key, const YAML::Node& node) {
  std::string v = yf::scalar(key, node);
  if (v.empty() || v == "NoClientCert") return ClientAuth::kNoClientCert;
  if (v == "RequestClientCert") return ClientAuth::kRequestClientCert;
  if (v == "RequireAnyClientCert" || v == "RequireClientCert") return ClientAuth::kRequireAnyClientCert;
  if (v == "VerifyClientCertIfGiven") return ClientAuth::kVerifyClientCertIfGiven;
  if (v == "RequireAndVerifyClientCert") return ClientAuth::kRequireAndVerifyClientCert;
  yf::fail(key, node,
           "expected NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven or "
           "RequireAndVerifyClientCert, got '" + v + "'");
}

int tls_version(const std::string& key, const YAML::Node& node) {
  std::string v = yf::scalar(key, node);
  if (v == "TLS10") return 0x0301;
  if (v == "TLS11") return 0x0302;
  if (v == "TLS12") return 0x0303;
  if (v == "TLS13") return 0x0304;
  yf::fail(key, node, "expected TLS10, TLS11, TLS12 or TLS13, got '" + v + "'");
}

std::vector<std::string> strings(const std::string& key, const YAML::Node& node) {
  if (!node.IsSequence()) yf::fail(key, node, "expected a list");
  std::vector<std::string> out;
  for (const auto& item : node) out.push_back(yf::scalar(key, item));
  return out;
}

// config_util.JoinDir: a relative path is taken from the config file's directory.
std::string join_dir(const std::string& dir, const std::string& path) {
  if (path.empty() || path.front() == '/' || dir.empty()) return path;
  return dir + "/" + path;
}

[[noreturn]] void not_implemented(const std::string& key, const YAML::Node& node) {
  yf::fail(key, node, "exporter-toolkit has this key but vigil-agent does not implement it (docs/deploy.md)");
}

// golang.org/x/crypto/bcrypt's format: $2a$, $2b$ or $2y$, a two-digit cost, 22 salt and 31 hash characters.
bool looks_like_bcrypt(const std::string& hash) {
  static const std::regex bcrypt(R"(\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53})");
  return std::regex_match(hash, bcrypt);
}

}  // namespace

WebConfig parse_web_config(const std::string& yaml_text, const std::string& config_dir) {
  WebConfig out;
  YAML::Node root = yf::load_document(yaml_text);
  if (root.IsNull()) return out;  // an empty file: plain HTTP, no auth (web_config_empty.yml upstream)
  TlsServerConfig& tls = out.tls;
  YAML::Node tls_node;  // handles, kept for the line of a cross-key error
  YAML::Node ca_node;
  yf::walk("", root, {
      {"tls_server_config",
       [&](const std::string& k, const YAML::Node& v) {
         tls_node = v;
         if (v.IsNull()) return;
         yf::walk(k, v, {
             {"cert_file", [&](const std::string& kk, const YAML::Node& vv) { tls.cert_file = yf::scalar(kk, vv); }},
             {"key_file", [&](const std::string& kk, const YAML::Node& vv) { tls.key_file = yf::scalar(kk, vv); }},
             {"client_ca_file",
              [&](const std::string& kk, const YAML::Node& vv) {
                tls.client_ca_file = yf::scalar(kk, vv);
                ca_node = vv;
              }},
             {"client_auth_type",
              [&](const std::string& kk, const YAML::Node& vv) {
                tls.client_auth = client_auth(kk, vv);
                tls.client_auth_set = !yf::scalar(kk, vv).empty();
              }},
             {"min_version", [&](const std::string& kk, const YAML::Node& vv) { tls.min_version = tls_version(kk, vv); }},
             {"max_version", [&](const std::string& kk, const YAML::Node& vv) { tls.max_version = tls_version(kk, vv); }},
             {"cipher_suites",
              [&](const std::string& kk, const YAML::Node& vv) { tls.cipher_suites = strings(kk, vv); }},
             {"prefer_server_cipher_suites",
              [&](const std::string& kk, const YAML::Node& vv) { tls.prefer_server_cipher_suites = yf::boolean(kk, vv); }},
             {"cert", not_implemented},
             {"key", not_implemented},
             {"client_ca", not_implemented},
             {"client_allowed_sans", not_implemented},
             {"curve_preferences", not_implemented},
         });
       }},
      {"http_server_config",
       [&](const std::string& k, const YAML::Node& v) {
         if (v.IsNull()) return;
         yf::walk(k, v, {
             // Only HTTP/1.1 is served; the switch is taken so that files written for Go servers load.
             {"http2", [](const std::string& kk, const YAML::Node& vv) { yf::boolean(kk, vv); }},
             {"headers",
              [&](const std::string& kk, const YAML::Node& vv) {
                if (vv.IsNull()) return;
                if (!vv.IsMap()) yf::fail(kk, vv, "expected a mapping");
                for (const auto& h : vv) {
                  std::string name = yf::scalar(kk, h.first);
                  std::string key = kk + "." + name;
                  auto allowed = allowed_headers().find(name);
                  if (allowed == allowed_headers().end())
                    yf::fail(key, h.first, "HTTP header '" + name + "' can not be configured (exporter-toolkit's list)");
                  std::string value = yf::scalar(key, h.second);
                  const auto& values = allowed->second;
                  if (!values.empty() && std::find(values.begin(), values.end(), value) == values.end()) {
                    std::string expected;
                    for (const auto& a : values) expected += (expected.empty() ? "" : ", ") + a;
                    yf::fail(key, h.second, "expected one of " + expected + ", got '" + value + "'");
                  }
                  if (value.find_first_of("\r\n") != std::string::npos)
                    yf::fail(key, h.second, "a header value cannot hold a line break");
                  if (!value.empty()) out.headers.emplace_back(name, value);  // blank: unset, as upstream
                }
              }},
         });
       }},
      {"basic_auth_users",
       [&](const std::string& k, const YAML::Node& v) {
         if (v.IsNull()) return;
         if (!v.IsMap()) yf::fail(k, v, "expected a mapping of user names to bcrypt hashes");
         for (const auto& u : v) {
           std::string user = yf::scalar(k, u.first);
           std::string key = k + "." + user;
           std::string hash = yf::scalar(key, u.second);
           if (!looks_like_bcrypt(hash))
             yf::fail(key, u.second, "expected a bcrypt hash ($2b$ or $2y$, e.g. from htpasswd -nBC 10)");
           if (!out.users.emplace(user, hash).second) yf::fail(key, u.first, "duplicate user");
         }
       }},
      {"rate_limit", not_implemented},
  });
  if (tls.enabled()) {
    // web/tls_config.go validateTLSPaths and ConfigToTLSConfig's checks, with their meanings.
    if (tls.cert_file.empty()) yf::fail("tls_server_config.cert_file", tls_node, "missing (TLS is on)");
    if (tls.key_file.empty()) yf::fail("tls_server_config.key_file", tls_node, "missing (TLS is on)");
    if (!tls.client_ca_file.empty() && tls.client_auth == ClientAuth::kNoClientCert)
      yf::fail("tls_server_config.client_ca_file", ca_node, "client CA's have been configured without a Client Auth Policy");
    // crypto/tls would verify against the system's roots; here the CA must be named.
    if (tls.client_ca_file.empty() && (tls.client_auth == ClientAuth::kVerifyClientCertIfGiven ||
                                       tls.client_auth == ClientAuth::kRequireAndVerifyClientCert))
      yf::fail("tls_server_config.client_ca_file", tls_node, "missing: client certificates are verified against it");
    if (tls.min_version > tls.max_version)
      yf::fail("tls_server_config.min_version", tls_node, "above max_version");
    tls.cert_file = join_dir(config_dir, tls.cert_file);
    tls.key_file = join_dir(config_dir, tls.key_file);
    tls.client_ca_file = join_dir(config_dir, tls.client_ca_file);
  }
  return out;
}

WebConfig load_web_config(const std::string& path) {
  std::string text = yf::read_config_file(path);
  size_t slash = path.rfind('/');
  return parse_web_config(text, slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash));
}

}  // namespace vigil::agent
