// Loads tcp.bpf.c: tp_btf programs need their tracepoint's BTF typedef, so each is checked first
// and left out (counted as "tracepoint_missing") when absent; the retransmit tracepoint falls
// back to the classic tracepoint, which every kernel since 4.15 has (SYN-ACK retransmits likewise).
#include "probes/tcp_probe.h"

#include <linux/types.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <stdexcept>

#include "probes/pinned_state.h"
#include "tcp_events.h"
#include "tcp.skel.h"

namespace vigil::agent {

namespace {

// A program's tracepoint, the last part of its section ("tp_btf/tcp_send_reset",
// "tracepoint/tcp/tcp_retransmit_skb"): both retransmit programs are one probe to a user.
std::string tracepoint_of(const bpf_program* prog) {
  std::string section = bpf_program__section_name(prog);
  return section.substr(section.rfind('/') + 1);
}

}  // namespace

std::vector<std::string> TcpProbe::names() {
  // Parses the embedded object only.
  std::unique_ptr<tcp_bpf, void (*)(tcp_bpf*)> skel(tcp_bpf__open(), tcp_bpf__destroy);
  std::vector<std::string> out;
  bpf_program* prog = nullptr;
  if (skel)
    bpf_object__for_each_program(prog, skel->obj) if (std::find(out.begin(), out.end(), tracepoint_of(prog)) == out.end())
        out.push_back(tracepoint_of(prog));
  return out;
}

// Every map that holds counts or the state they are derived from (owners' last total_retrans,
// the connection ends the correlator reads) and the set's own counters: a restart continues them.
constexpr const char* kPinnedMaps[] = {"owners", "unowned_retrans", "peers",           "procs",
                                       "peer_counts", "conns",   "retrans_settled", "probe_stats"};

void TcpProbe::choose_programs(tcp_bpf& skel, const std::string& btf_path, const std::set<std::string>& off) {
  // A tp_btf program whose tracepoint the kernel's BTF lacks is left out; the two retransmit
  // ones have a classic-tracepoint fallback instead (exactly one of each pair is loaded). The
  // tp_btf forms come first: classic tracepoint programs are skipped while the CPU runs another
  // BPF program or copies a map for user space (bpf/tcp.bpf.c, synack_btf).
  struct Optional {
    bpf_program* prog;
    const char* tracepoint;
    bpf_program* fallback;
  };
  const Optional btf_programs[] = {
      {skel.progs.retransmit_btf, "tcp_retransmit_skb", skel.progs.retransmit_tp},
      {skel.progs.synack_btf, "tcp_retransmit_synack", skel.progs.synack_tp},
      {skel.progs.send_reset, "tcp_send_reset", nullptr},
      {skel.progs.receive_reset, "tcp_receive_reset", nullptr},
      {skel.progs.set_state, "inet_sock_set_state", nullptr},
      {skel.progs.sendmsg_locked, "tcp_sendmsg_locked", nullptr},
  };
  missing_ = 0;
  for (const auto& p : btf_programs) {
    const bool have = kernel_has_btf_tracepoint(btf_path, p.tracepoint);
    bpf_program__set_autoload(p.prog, have);
    if (p.fallback) bpf_program__set_autoload(p.fallback, !have);
    else if (!have) ++missing_;
  }
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, skel.obj) if (off.count(tracepoint_of(prog))) bpf_program__set_autoload(prog, false);
}

TcpProbe::TcpProbe(const std::string& btf_path, AgentStats& stats, const std::set<std::string>& off,
                   const std::string& pin_dir)
    : stats_(stats), skel_("tcp", {tcp_bpf__open_opts, tcp_bpf__load, tcp_bpf__destroy}) {
  skel_.load(btf_path, pin_dir, {std::begin(kPinnedMaps), std::end(kPinnedMaps)},
             [&](tcp_bpf& skel) { choose_programs(skel, btf_path, off); });
  for (int i = 0; i < missing_; ++i) stats_.attach_failure("tcp", "tracepoint_missing");

  std::vector<const bpf_map*> shared;
  for (const char* name : kPinnedMaps) shared.push_back(bpf_object__find_map_by_name(skel_->obj, name));
  links_ = std::make_unique<PinnedLinks>("tcp", pin_dir.empty() ? "" : pin_dir + "/links", shared);
  // Links go under the set's directory even when its maps could not be reused: the previous
  // agent's then fail the same-maps check and are replaced, not left counting into maps no one reads.
  if (!pin_dir.empty()) mkdir((pin_dir + "/links").c_str(), 0700);
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, skel_->obj) {
    if (!bpf_program__autoload(prog)) {
      links_->drop(prog);
      continue;
    }
    if (int err = links_->attach(prog)) stats_.attach_failure("tcp", errno_reason(err));
  }
  links_->report();
  stats_.add_attached("tcp", links_->size());
  stats_sources_ = std::make_unique<SetStatsSources>(
      stats_, "tcp", skel_->maps.probe_stats, skel_->obj,
      std::vector<const bpf_map*>{skel_->maps.owners, skel_->maps.peers, skel_->maps.peer_counts, skel_->maps.procs,
                                  skel_->maps.conns, skel_->maps.unowned_retrans},
      [this] { return links_->running(); });
}

TcpProbe::~TcpProbe() { stats_.add_attached("tcp", -links_->size()); }

int TcpProbe::peers_fd() const { return bpf_map__fd(skel_->maps.peers); }
int TcpProbe::peer_counts_fd() const { return bpf_map__fd(skel_->maps.peer_counts); }
int TcpProbe::procs_fd() const { return bpf_map__fd(skel_->maps.procs); }
int TcpProbe::conns_fd() const { return bpf_map__fd(skel_->maps.conns); }
int TcpProbe::retrans_settled_fd() const { return bpf_map__fd(skel_->maps.retrans_settled); }

}  // namespace vigil::agent
