// Loads usdt.bpf.c. A file is tried for every provider; a provider none of whose probes the file
// has is simply not there (libtorch has no vigil:*), while a provider with only some of its
// probes counts the missing ones as attach failures ("usdt_missing").
#include "probes/usdt_probe.h"

#include <linux/types.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "probes/pinned_state.h"
#include "probes/usdt_notes.h"
#include "usdt_events.h"
#include "usdt.skel.h"

namespace vigil::agent {

namespace {

struct Probe {
  const char* provider;
  const char* name;
};

// In the order of the programs in usdt.bpf.c that handle them (programs() below).
const Probe kProbes[] = {
    {"pytorch", "malloc"},         {"pytorch", "free"},
    {"vigil", "alloc_block_alloc"}, {"vigil", "alloc_block_free"},
    {"vigil", "alloc_snapshot"},
};

std::string full_name(const Probe& p) { return std::string(p.provider) + ":" + p.name; }

}  // namespace

std::vector<std::string> UsdtProbe::names() {
  std::vector<std::string> out;
  for (const auto& p : kProbes) out.push_back(full_name(p));
  return out;
}

// The allocators' totals and their live blocks (a free after a restart finds its block), and the
// set's own counters.
constexpr const char* kPinnedMaps[] = {"allocators", "blocks", "probe_stats"};

UsdtProbe::UsdtProbe(const std::string& btf_path, AgentStats& stats, std::set<std::string> off,
                     const std::string& pin_dir)
    : stats_(stats), skel_("usdt", {usdt_bpf__open_opts, usdt_bpf__load, usdt_bpf__destroy}), off_(std::move(off)),
      files_("usdt", stats) {
  skel_.load(btf_path, pin_dir, {std::begin(kPinnedMaps), std::end(kPinnedMaps)});
  stats_sources_ = std::make_unique<SetStatsSources>(
      stats_, "usdt", skel_->maps.probe_stats, skel_->obj,
      std::vector<const bpf_map*>{skel_->maps.allocators, skel_->maps.blocks});
}

UsdtProbe::~UsdtProbe() = default;

int UsdtProbe::attach(const std::string& path, dev_t dev, ino_t inode, const std::string& name) {
  auto [file, added] = files_.seen({dev, inode});
  if (!added) return 0;
  file.name = name;
  std::vector<std::string> wanted;
  for (const auto& p : kProbes)
    if (!off_.count(full_name(p))) wanted.push_back(full_name(p));
  const UsdtSites found = usdt_sites(path, wanted, kMaxUsdtSitesPerFile);
  if (!found.refused.empty()) {
    stats_.attach_failure("usdt", "usdt_notes");
    std::fprintf(stderr, "vigil-agent: usdt: refusing %s: %s\n", name.c_str(), found.refused.c_str());
    return 0;
  }
  if (found.sites == 0) return 0;  // none of ours: nothing for libbpf to look at
  // Past libbpf's pool an attach fails midway with E2BIG (the agent before this check also aborted
  // at exit then, "double free detected": not investigated further, avoided).
  if (files_.sites_held() + found.sites > usdt_spec_pool(skel_->obj)) {
    stats_.attach_failure("usdt", "usdt_pool_full");
    std::fprintf(stderr, "vigil-agent: usdt: not attaching %s: %d sites past the %d spec ids held by attached files\n",
                 name.c_str(), found.sites, usdt_spec_pool(skel_->obj));
    return 0;
  }
  file.sites = found.sites;
  bpf_program* const programs[] = {skel_->progs.pytorch_malloc, skel_->progs.pytorch_free,
                                   skel_->progs.vigil_block_alloc, skel_->progs.vigil_block_free,
                                   skel_->progs.vigil_alloc_snapshot};
  static_assert(std::size(programs) == std::size(kProbes));
  std::map<std::string, std::pair<int, int>> by_provider;  // attached, missing
  int n = 0;
  for (size_t i = 0; i < std::size(kProbes); ++i) {
    const Probe& p = kProbes[i];
    if (off_.count(full_name(p))) continue;
    Link link(bpf_program__attach_usdt(programs[i], -1, path.c_str(), p.provider, p.name, nullptr));
    if (!link) {
      int err = errno;
      if (err == ENOENT) {
        ++by_provider[p.provider].second;
      } else {
        stats_.attach_failure("usdt", errno_reason(err));
        std::fprintf(stderr, "vigil-agent: usdt: cannot attach %s:%s in %s: %s\n", p.provider, p.name,
                     name.c_str(), errno_reason(err).c_str());
      }
      continue;
    }
    ++by_provider[p.provider].first;
    file.links.push_back(std::move(link));
    ++n;
  }
  for (const auto& [provider, counts] : by_provider)
    if (counts.first > 0)
      for (int i = 0; i < counts.second; ++i) stats_.attach_failure("usdt", "usdt_missing");
  stats_.add_attached("usdt", n);
  if (n > 0) std::fprintf(stderr, "vigil-agent: usdt: %d probes attached in %s\n", n, name.c_str());
  return n;
}

int UsdtProbe::attach(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    stats_.attach_failure("usdt", "library_missing");
    std::fprintf(stderr, "vigil-agent: usdt: %s not found\n", path.c_str());
    return 0;
  }
  int n = attach(path, st.st_dev, st.st_ino, path);
  files_.seen({st.st_dev, st.st_ino}).first.pinned = true;
  return n;
}

int UsdtProbe::allocators_fd() const { return bpf_map__fd(skel_->maps.allocators); }
int UsdtProbe::blocks_fd() const { return bpf_map__fd(skel_->maps.blocks); }

}  // namespace vigil::agent
