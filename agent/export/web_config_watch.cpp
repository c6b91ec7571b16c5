// Stamps are taken before a reload reads the files, so a change made during the reload is seen
// by the next connection; a failed attempt records its stamps too, so a half-rotated pair (new
// certificate, old key) is retried once the key changes, not on every connection meanwhile.
#include "export/web_config_watch.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "export/tls_context.h"

namespace vigil::agent {

WebConfigWatch::WebConfigWatch(std::string path, HttpStats& stats) : path_(std::move(path)), stats_(stats) {
  active_ = load(path_);
  watched_ = watched(*active_);
  std::sort(watched_.begin(), watched_.end());
  stamps_ = stamps(watched_);
  stats_.web_config_reloaded(true);
}

std::shared_ptr<const ActiveWebConfig> WebConfigWatch::load(const std::string& path) {
  auto c = std::make_shared<ActiveWebConfig>();
  c->config = load_web_config(path);
  if (c->config.tls.enabled()) c->tls = make_tls_context(c->config.tls);
  return c;
}

std::vector<std::string> WebConfigWatch::watched(const ActiveWebConfig& c) const {
  std::vector<std::string> paths = {path_};
  for (const std::string* p : {&c.config.tls.cert_file, &c.config.tls.key_file, &c.config.tls.client_ca_file})
    if (!p->empty()) paths.push_back(*p);
  return paths;
}

std::vector<WebConfigWatch::Stamp> WebConfigWatch::stamps(const std::vector<std::string>& paths) {
  std::vector<Stamp> out;
  for (const auto& p : paths) {
    Stamp s;
    struct stat st {};
    if (stat(p.c_str(), &st) != 0) {
      s.error = errno;
    } else {
      s = {0, st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
           st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec};
    }
    out.push_back(s);
  }
  return out;
}

std::shared_ptr<const ActiveWebConfig> WebConfigWatch::current() {
  std::vector<Stamp> now = stamps(watched_);
  if (now == stamps_) return active_;
  stamps_ = now;
  std::vector<std::string> paths = watched(*active_);
  try {
    auto next = std::make_shared<ActiveWebConfig>();
    next->config = load_web_config(path_);
    // Watched from now on even if they cannot be loaded yet: a fix to them is a change.
    for (const auto& p : watched(*next)) paths.push_back(p);
    if (next->config.tls.enabled()) next->tls = make_tls_context(next->config.tls);
    if (static_cast<bool>(next->tls) != static_cast<bool>(active_->tls))
      throw ConfigKeyError("tls_server_config", 0, "turning TLS on or off needs a restart");
    active_ = next;
    paths = watched(*active_);
    stats_.web_config_reloaded(true);
    std::fprintf(stderr, "vigil-agent: web config %s reloaded\n", path_.c_str());
  } catch (const ConfigKeyError& e) {
    stats_.web_config_reloaded(false);
    std::fprintf(stderr, "vigil-agent: web config %s: %s: %s; still serving the last good one\n", path_.c_str(),
                 e.key().c_str(), e.what());
  }
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  if (paths != watched_) {
    watched_ = paths;
    stamps_ = stamps(watched_);
  }
  return active_;
}

}  // namespace vigil::agent
