// The web config in force, reread when its file or a file it names changes. exporter-toolkit
// rereads the config on every request and the certificate on every handshake (web/handler.go
// ServeHTTP, web/tls_config.go GetConfigForClient); here a new connection costs a stat of each
// file, and only a change costs a reload. A reload that fails keeps the last good config.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include <boost/asio/ssl/context.hpp>

#include "export/basic_auth.h"
#include "export/web_config.h"
#include "stats/http_stats.h"

namespace vigil::agent {

struct ActiveWebConfig {
  WebConfig config;
  std::shared_ptr<boost::asio::ssl::context> tls;  // null: plain HTTP
};

class WebConfigWatch {
 public:
  // Loads PATH and the files it names; throws ConfigKeyError (the agent does not start on a bad file).
  WebConfigWatch(std::string path, HttpStats& stats);

  // The config for a new connection, reloaded first when a watched file changed. One caller at a
  // time (the I/O thread).
  std::shared_ptr<const ActiveWebConfig> current();
  BasicAuth& basic_auth() { return basic_auth_; }

 private:
  struct Stamp {
    int error = 0;  // errno of stat, 0 when it worked
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    long long mtime_ns = 0;
    long long ctime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };

  static std::shared_ptr<const ActiveWebConfig> load(const std::string& path);
  std::vector<std::string> watched(const ActiveWebConfig& c) const;
  static std::vector<Stamp> stamps(const std::vector<std::string>& paths);

  std::string path_;
  HttpStats& stats_;
  BasicAuth basic_auth_;
  std::shared_ptr<const ActiveWebConfig> active_;
  std::vector<std::string> watched_;  // the config and the files the last attempt named
  std::vector<Stamp> stamps_;         // as they were at the last attempt, good or bad
};

}  // namespace vigil::agent
