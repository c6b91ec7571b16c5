// The OpenSSL server context a web config's tls_server_config describes: certificate chain, key,
// client CA and client-certificate policy, protocol versions and TLS 1.2 cipher suites.
#pragma once

#include <memory>

#include <boost/asio/ssl/context.hpp>

#include "export/web_config.h"

namespace vigil::agent {

// Reads the certificate, key and client CA files; throws ConfigKeyError naming the key whose file
// cannot be read or used (the key file's when the key is not the certificate's).
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const TlsServerConfig& tls);

}  // namespace vigil::agent
