// crypto/tls's server settings as exporter-toolkit sets them (web/tls_config.go ConfigToTLSConfig),
// expressed through OpenSSL: ClientAuthType becomes SSL_CTX_set_verify's mode, with a callback that
// accepts any certificate for the two policies that ask for one without verifying it.
#include "export/tls_context.h"

#include <openssl/ssl.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include <boost/system/system_error.hpp>

namespace vigil::agent {
namespace {

namespace ssl = boost::asio::ssl;

int accept_any_certificate(int /*preverified*/, X509_STORE_CTX* /*store*/) { return 1; }

void check_readable(const std::string& key, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigKeyError(key, 0, "cannot read '" + path + "': " + std::strerror(errno));
}

// Runs one context call; an OpenSSL refusal becomes an error naming the key.
template <typename Call>
void load(const std::string& key, const std::string& path, Call call) {
  check_readable(key, path);
  try {
    call();
  } catch (const boost::system::system_error& e) {
    throw ConfigKeyError(key, 0, "cannot use '" + path + "': " + e.code().message());
  }
}

}  // namespace

std::shared_ptr<ssl::context> make_tls_context(const TlsServerConfig& tls) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_compression | SSL_OP_NO_RENEGOTIATION |
                   (tls.prefer_server_cipher_suites ? SSL_OP_CIPHER_SERVER_PREFERENCE : 0));
  if (SSL_CTX_set_min_proto_version(native, tls.min_version) != 1 ||
      SSL_CTX_set_max_proto_version(native, tls.max_version) != 1)
    throw ConfigKeyError("tls_server_config.min_version", 0, "OpenSSL refused the TLS version range");
  load("tls_server_config.cert_file", tls.cert_file, [&] { ctx->use_certificate_chain_file(tls.cert_file); });
  // Loaded after the certificate, so OpenSSL refuses a key that is not its ("key values mismatch").
  load("tls_server_config.key_file", tls.key_file, [&] { ctx->use_private_key_file(tls.key_file, ssl::context::pem); });
  if (!tls.client_ca_file.empty()) {
    load("tls_server_config.client_ca_file", tls.client_ca_file, [&] { ctx->load_verify_file(tls.client_ca_file); });
    // Named in the CertificateRequest, as crypto/tls does with ClientCAs' subjects.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(tls.client_ca_file.c_str()))
      SSL_CTX_set_client_CA_list(native, names);
  }
  if (!tls.cipher_suites.empty()) {
    std::string list;
    for (const auto& iana : tls.cipher_suites) {
      const char* name = OPENSSL_cipher_name(iana.c_str());  // "(NONE)" when OpenSSL has no such suite
      if (name == nullptr || std::strcmp(name, "(NONE)") == 0)
        throw ConfigKeyError("tls_server_config.cipher_suites", 0, "unknown cipher: " + iana);
      if (!list.empty()) list += ':';
      list += name;
    }
    if (SSL_CTX_set_cipher_list(native, list.c_str()) != 1)
      throw ConfigKeyError("tls_server_config.cipher_suites", 0, "OpenSSL refused the cipher list " + list);
  }
  // A server that asks for client certificates must name its session context, or OpenSSL refuses
  // every resumed session ("session id context uninitialized").
  static constexpr unsigned char kSessionContext[] = "vigil-agent";
  SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1);
  switch (tls.client_auth) {
    case ClientAuth::kNoClientCert: SSL_CTX_set_verify(native, SSL_VERIFY_NONE, nullptr); break;
    case ClientAuth::kRequestClientCert: SSL_CTX_set_verify(native, SSL_VERIFY_PEER, accept_any_certificate); break;
    case ClientAuth::kRequireAnyClientCert:
      SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, accept_any_certificate);
      break;
    case ClientAuth::kVerifyClientCertIfGiven: SSL_CTX_set_verify(native, SSL_VERIFY_PEER, nullptr); break;
    case ClientAuth::kRequireAndVerifyClientCert:
      SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      break;
  }
  return ctx;
}

}  // namespace vigil::agent
