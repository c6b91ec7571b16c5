// Loader of collective.bpf.c. Both probes or neither: a binary with only one of them would give
// begins without ends (or the reverse), so a partial attach is undone and counted.
#include "probes/collective_probe.h"

#include <linux/types.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "collective_events.h"
#include "collective.skel.h"
#include "probes/pinned_state.h"
#include "probes/usdt_notes.h"

namespace vigil::agent {

namespace {

// Collective progress per process (counters, the open collective, its group), the set's own counters, and the
// failure ring: what no agent had read at a restart, the next one reads. USDT links cannot be
// pinned (libbpf's have no fd): collectives begun or ended while no agent runs are not seen.
constexpr const char* kPinnedMaps[] = {"procs", "groups", "probe_stats", "failures"};

}  // namespace

// With pins, libbpf reuses each pinned map whose type, sizes and flags match (CudaProbe).
CollectiveProbe::CollectiveProbe(const std::string& btf_path, AgentStats& stats, OnFailure on_failure,
                                 const std::string& pin_dir)
    : stats_(stats),
      on_failure_(std::move(on_failure)),
      skel_("collective", {collective_bpf__open_opts, collective_bpf__load, collective_bpf__destroy}),
      files_("collective", stats) {
  skel_.load(btf_path, pin_dir, {std::begin(kPinnedMaps), std::end(kPinnedMaps)});
  const std::vector<const bpf_map*> tables{skel_->maps.procs, skel_->maps.groups};
  stats_sources_ = std::make_unique<SetStatsSources>(stats_, "collective", skel_->maps.probe_stats, skel_->obj, tables);
}

CollectiveProbe::~CollectiveProbe() = default;

int CollectiveProbe::attach(const std::string& path, dev_t dev, ino_t inode, const std::string& name) {
  auto [file, added] = files_.seen({dev, inode});
  if (!added) return 0;
  file.name = name;
  const UsdtSites found = usdt_sites(path, {"vigil:collective_begin", "vigil:collective_end"}, kMaxUsdtSitesPerFile);
  if (!found.refused.empty()) {
    stats_.attach_failure("collective", "usdt_notes");
    std::fprintf(stderr, "vigil-agent: collective: refusing %s: %s\n", name.c_str(), found.refused.c_str());
    return 0;
  }
  if (found.sites == 0) return 0;  // not a binary with collectives
  if (files_.sites_held() + found.sites > usdt_spec_pool(skel_->obj)) {  // as in UsdtProbe::attach
    stats_.attach_failure("collective", "usdt_pool_full");
    std::fprintf(stderr, "vigil-agent: collective: not attaching %s: past the %d spec ids of attached files\n",
                 name.c_str(), usdt_spec_pool(skel_->obj));
    return 0;
  }
  file.sites = found.sites;
  Link begin(bpf_program__attach_usdt(skel_->progs.collective_begin, -1, path.c_str(), "vigil", "collective_begin",
                                      nullptr));
  const int begin_err = begin ? 0 : errno;
  Link end(bpf_program__attach_usdt(skel_->progs.collective_end, -1, path.c_str(), "vigil", "collective_end", nullptr));
  const int end_err = end ? 0 : errno;
  if (begin_err == ENOENT && end_err == ENOENT) return 0;  // not a binary with collectives
  if (!begin || !end) {
    const int err = begin_err ? begin_err : end_err;
    stats_.attach_failure("collective", err == ENOENT ? "usdt_missing" : errno_reason(err));
    std::fprintf(stderr, "vigil-agent: collective: cannot attach both probes in %s: %s\n", name.c_str(),
                 errno_reason(err).c_str());
    return 0;
  }
  file.links.push_back(std::move(begin));
  file.links.push_back(std::move(end));
  stats_.add_attached("collective", 2);
  std::fprintf(stderr, "vigil-agent: collective: 2 probes attached in %s\n", name.c_str());
  return 2;
}

int CollectiveProbe::attach(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    stats_.attach_failure("collective", "library_missing");
    std::fprintf(stderr, "vigil-agent: collective: %s not found\n", path.c_str());
    return 0;
  }
  int n = attach(path, st.st_dev, st.st_ino, path);
  files_.seen({st.st_dev, st.st_ino}).first.pinned = true;
  return n;
}

int CollectiveProbe::on_event(void* ctx, void* data, size_t size) {
  auto* self = static_cast<CollectiveProbe*>(ctx);
  if (size < sizeof(collective_failure)) return 0;
  collective_failure f;
  std::memcpy(&f, data, sizeof f);
  self->stats_.ringbuf_event("collective");
  self->on_failure_(f);
  return 0;
}

void CollectiveProbe::add_rings(RingReader& reader) {
  reader.add("collective", bpf_map__fd(skel_->maps.failures), on_event, this);
}

int CollectiveProbe::procs_fd() const { return bpf_map__fd(skel_->maps.procs); }
int CollectiveProbe::groups_fd() const { return bpf_map__fd(skel_->maps.groups); }

}  // namespace vigil::agent
