// Tracepoint links that outlive the agent. A link's program cannot be swapped (tracing and perf
// links have no BPF_LINK_UPDATE), so a new build's program replaces the old link: unpinned and
// closed first, then attached, so an event is never counted by both (the gap is logged).
#include "probes/pinned_links.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace vigil::agent {
namespace {

struct ProgIdentity {
  __u32 type = 0;
  __u8 tag[BPF_TAG_SIZE] = {};
  std::vector<__u32> map_ids;
};

// The program's type, tag (a hash of its instructions with map references blanked, so one build
// on one kernel has one tag) and the maps it uses; false when the kernel does not say.
bool identity_of(int prog_fd, ProgIdentity& out) {
  bpf_prog_info info{};
  __u32 len = sizeof info;
  if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return false;
  out.map_ids.resize(info.nr_map_ids);
  const __u32 nr = info.nr_map_ids;
  info = {};
  info.nr_map_ids = nr;
  info.map_ids = reinterpret_cast<__u64>(out.map_ids.data());
  len = sizeof info;
  if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return false;
  out.type = info.type;
  std::copy(std::begin(info.tag), std::end(info.tag), out.tag);
  return true;
}

__u32 map_id(const bpf_map* map) {
  bpf_map_info info{};
  __u32 len = sizeof info;
  return bpf_obj_get_info_by_fd(bpf_map__fd(map), &info, &len) == 0 ? info.id : 0;
}

}  // namespace

PinnedLinks::PinnedLinks(std::string set, std::string dir, const std::vector<const bpf_map*>& shared)
    : set_(std::move(set)), dir_(std::move(dir)) {
  for (const bpf_map* m : shared) shared_ids_.push_back(map_id(m));
}

PinnedLinks::~PinnedLinks() {
  for (const auto& [name, fd] : running_) close(fd);
  // Closing a pinned link's fd leaves it attached; libbpf's destroy of a perf-event link would
  // also disable the event under it, so pinned links are disconnected and only their fd closed.
  for (auto& l : links_)
    if (bpf_link__pin_path(l.get())) {
      bpf_link__disconnect(l.get());
      close(bpf_link__fd(l.get()));
    }
}

// The pinned link for PROG, when it runs PROG's instructions on this set's shared maps: what this
// agent would attach, already counting. Null otherwise (nothing pinned, or another build).
Link PinnedLinks::adopt(const std::string& path, const bpf_program* prog, int& running_fd) {
  if (access(path.c_str(), F_OK) != 0) return nullptr;  // nothing pinned (libbpf would log the miss)
  Link old(bpf_link__open(path.c_str()));
  if (!old) return nullptr;
  bpf_link_info linfo{};
  __u32 len = sizeof linfo;
  ProgIdentity was, now;
  bool same = bpf_obj_get_info_by_fd(bpf_link__fd(old.get()), &linfo, &len) == 0;
  int fd = same ? bpf_prog_get_fd_by_id(linfo.prog_id) : -1;
  same = fd >= 0 && identity_of(fd, was) && identity_of(bpf_program__fd(prog), now);
  same = same && was.type == now.type && std::equal(std::begin(was.tag), std::end(was.tag), now.tag);
  for (__u32 id : now.map_ids)
    if (same && std::count(shared_ids_.begin(), shared_ids_.end(), id))
      same = std::count(was.map_ids.begin(), was.map_ids.end(), id) > 0;
  if (same) {
    running_fd = fd;
    return old;
  }
  if (fd >= 0) close(fd);
  unlink(path.c_str());  // unpinned: closing `old` now detaches it
  ++replaced_;
  return nullptr;
}

int PinnedLinks::attach(bpf_program* prog) {
  const std::string path = dir_.empty() ? "" : dir_ + "/" + bpf_program__name(prog);
  if (!path.empty())
    if (int fd = -1; Link old = adopt(path, prog, fd)) {
      running_[bpf_program__name(prog)] = fd;
      links_.push_back(std::move(old));
      ++adopted_;
      return 0;
    }
  Link link(bpf_program__attach(prog));
  if (!link) return -errno;
  if (!path.empty())
    if (int err = bpf_link__pin(link.get(), path.c_str()))
      std::fprintf(stderr, "vigil-agent: %s: cannot pin %s (a restart misses its events): %s\n", set_.c_str(),
                   path.c_str(), errno_reason(err).c_str());
  links_.push_back(std::move(link));
  return 0;
}

void PinnedLinks::drop(const bpf_program* prog) {
  if (!dir_.empty()) unlink((dir_ + "/" + bpf_program__name(prog)).c_str());
}

void PinnedLinks::report() const {
  if (dir_.empty()) return;
  std::fprintf(stderr,
               "vigil-agent: %s: %d tracepoint links adopted from a previous agent, %d replaced (another build), "
               "%d attached new; pinned in %s\n",
               set_.c_str(), adopted_, replaced_, size() - adopted_, dir_.c_str());
}

}  // namespace vigil::agent
