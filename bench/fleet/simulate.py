#!/usr/bin/env python3
"""Fleet simulator: one process serving N vigil-agent endpoints built from real recorded scrapes.

Why one port with a path per node (/node/<i>/metrics) and not one port per node: the scrapers
reach every node through one listener and a file_sd target list that sets __metrics_path__,
instance, node and cluster per target, so N is not bounded by ports or file descriptors of
listeners, and "an agent removed from discovery" is just a target dropped from that file. One
asyncio loop keeps every scraper's keep-alive connection without a thread per connection.

Each node runs --gpus ranks (one process per GPU). A rank's series are the recorded GPU process's
and NCCL process's series (bench/fleet/recordings, from record.py) under the rank's own pid, pod,
container and peer; counters grow at the recorded rates times a per-rank factor, gauges keep
their recorded values. The agent's own series come once per node, and so do the series it sums
per container and program (one pod per node: every rank's share in one series). Faults (--faults JSON list of
{"node": i, "kind": k, "start": s, "end": e}, seconds after start) change a node's rank 0:
  gpu   the fault recording's GPU series (small allocations, failing graph launches): the P1
        VigilGpuFragmentationGraphFailures
  tcp   the fault recording's TCP/NCCL series (backoff, stall, risk, a correlated abort): the P1s
        VigilNcclTcpTimeoutRiskHigh and VigilNcclTcpCorrelatedTimeouts; and rank 0's end toward
        the next node stalled (tcp_peer_stall_seconds), which must page nothing over there
  tcp_remote  the stall is on the sender's node only: rank 0 of node I counts one NCCL abort as
        uncorrelated (its own sockets are quiet) and rank 0 of node I+1 has its end toward node
        I's address stalled: the P1 VigilNcclTcpCrossNodeCorrelatedTimeouts for node I's rank with
        peer_node node I+1, nothing for node I+1
  rank_stuck  rank 0 of node I stops one collective short while the other nodes' rank 0s, the
        ranks of its cluster's communicator, enter their next one and wait (their latest entry
        ages): the P1 VigilCollectiveRankStuck for node I's rank, nothing for the others
  down  the endpoint answers 503 (the agent hangs or crashes; its target stays)
  gone  the target leaves the file_sd list at once and the endpoint answers 404 GONE_AFTER_S later
        (the pod is deleted: Kubernetes removes its endpoint when it starts terminating, and the
        container serves on through its termination grace; a scraper that has not applied the new
        list yet scrapes it once more, not a 404: Prometheus applies discovery updates at most
        every 5 s, vmagent at its own pace, and a 404 in that gap would count as one engine's
        agent down and not the other's)
Node I's address is 10.64.<I // 256>.<I % 256> (its agent at port 9435, the instance label); a
rank's `peer` is the next node's. Families that hold addresses, synthesized here for every
node (the recorded ones name the recording host's veth pair): nccl_tcp_collective_peers (each rank's connections to the previous and the next node, from
the node's address) and tcp_peer_stall_seconds (only the stalled ends of the tcp faults); and the
uncorrelated abort of tcp_remote; and each cluster's communicator, of which every node's rank 0
is the rank of the node's index in the cluster: nccl_comm_collectives_total (COLLECTIVES_PER_S)
and nccl_comm_last_collective_age_seconds. The contract is the agent's (docs/correlation.md).
Prints "ready port=P t0=T" once serving. usage: simulate.py --nodes N --sd-file F [--faults JSON]"""
import argparse
import asyncio
import hashlib
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
# How long a gone node's endpoint still serves after it left discovery (see "gone" above).
GONE_AFTER_S = 15
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
IDENTITY = ('pid', 'comm', 'container_id', 'pod_uid', 'namespace', 'pod', 'container')
GPU_FAMILIES = ('gpu_', 'cuda_')  # the families the gpu fault changes; tcp_ and nccl_ for tcp
# Families synthesized per node (see above); the recordings' samples of them are not used (their
# addresses are the node's), only their HELP and TYPE; the text here is for recordings without them.
SYNTHETIC = {
    'nccl_tcp_collective_peers': 'The address pairs of the TCP connections a collective process holds.',
    'tcp_peer_stall_seconds': 'How long the connection from local_address to peer has been in RTO backoff without progress.',
    'nccl_comm_collectives_total': 'Collectives entered on a communicator, by its id, this process\'s rank and nranks.',
    'nccl_comm_last_collective_age_seconds': 'Seconds since this rank last entered a collective on the communicator.',
}
# A healthy rank's collectives: one every 100 ms, its latest entered 50 ms ago at any scrape.
COLLECTIVES_PER_S = 10
HEALTHY_AGE_S = 0.05
# How long the sender's end has been stalled when the waiting rank's watchdog gives up: the
# recorded abort came after a 9 s stall.
STALL_AT_ABORT = 10.0


def parse(path):
    """(header fields, families in order {name: [HELP/TYPE lines]}, types, samples [(name, labels, value)])."""
    header, families, types, samples = {}, {}, {}, []
    with open(path) as f:
        for line in f.read().splitlines():
            if line.startswith('# vigil-fleet '):
                header = dict(kv.split('=') for kv in line.split()[2:])
            elif line.startswith('# HELP ') or line.startswith('# TYPE '):
                name = line.split()[2]
                families.setdefault(name, []).append(line)
                if line.startswith('# TYPE '):
                    types[name] = line.split()[3]
            elif line and not line.startswith('#'):
                m = SAMPLE.match(line)
                samples.append((m.group(1), LABEL.findall(m.group(2) or ''), float(m.group(3))))
    return header, families, types, samples


def family_of(name, types):
    for suffix in ('_bucket', '_sum', '_count'):
        if name.endswith(suffix) and types.get(name[:-len(suffix)]) == 'histogram':
            return name[:-len(suffix)]
    return name


class Recording:
    """The four recorded scrapes as series keyed by (part, name, labels without identity):
    part 'gpu' or 'nccl' for the two workload processes, 'group' for the series the agent sums
    over a container's program (no pid: the allocation-size histogram, TCP resets), 'node' for
    the agent's own series and the kernel's unattributed ones."""

    def __init__(self, folder):
        self.families, self.types = {}, {}
        states = {}
        for state in ('healthy', 'healthy.later', 'fault', 'fault.later'):
            header, families, types, samples = parse(os.path.join(folder, state + '.prom'))
            for name, lines in families.items():
                self.families.setdefault(name, lines)
            self.types.update(types)
            dt = float(header['time'])
            parts = {header['gpu_pid']: 'gpu', header['nccl_pid']: 'nccl'}
            series = {}
            for name, labels, value in samples:
                d = dict(labels)
                if 'pid' in d:
                    part = parts.get(d['pid'])
                    if part is None:
                        continue  # another process on the recording machine
                elif d.get('comm', 'python3') not in ('python3', '[unattributed]'):
                    continue
                elif d.get('comm') == 'python3' and 'container_id' in d:
                    part = 'group'  # summed per container and program by the agent: no pid
                else:
                    part = 'node'
                key = (part, name, tuple((k, v) for k, v in labels if part == 'node' or k not in IDENTITY))
                series[key] = (tuple(k for k, _ in labels), value)
            states[state] = (dt, series)
        self.healthy = self.rates(states['healthy'], states['healthy.later'])
        self.fault = self.rates(states['fault'], states['fault.later'])

    def rates(self, first, later):
        """{key: (label names, value now, counter rate per second or None for a gauge)}."""
        (t0, s0), (t1, s1) = first, later
        out = {}
        for key, (names, v1) in s1.items():
            counter = self.types.get(family_of(key[1], self.types)) in ('counter', 'histogram')
            v0 = s0.get(key, (names, v1))[1]
            out[key] = (names, v1, max(0.0, (v1 - v0) / (t1 - t0)) if counter else None)
        return out


def esc(v):
    return v.replace('\\', '\\\\').replace('"', '\\"')


def identity(i, n, clusters):
    """Node I's target labels, its address and its ring peers' (nodes I+1 and I-1)."""
    ip = lambda j: '10.64.%d.%d' % (j // 256, j % 256)  # noqa: E731
    return {'cluster': 'fleet-%d' % (i * clusters // n), 'node': 'gpu-node-%04d' % i,
            'instance': ip(i) + ':9435', 'address': ip(i), 'peer': ip((i + 1) % n), 'previous': ip((i - 1) % n)}


def rank_labels(node, rank):
    """The agent's process labels for rank RANK on NODE: one pod per node, one process per GPU."""
    return {'pid': str(4000 + 17 * rank), 'comm': 'python3', 'namespace': 'inference',
            'pod': 'vllm-%s' % node, 'container': 'vllm', 'pod_uid': hashlib.md5(node.encode()).hexdigest(),
            'container_id': hashlib.sha256(('%s/vllm' % node).encode()).hexdigest()}


def communicator_of(cluster):
    """The id of a cluster's communicator, as the agent labels one (16 hex digits)."""
    return hashlib.sha256(('communicator/' + cluster).encode()).hexdigest()[:16]


def comm_members(nodes, clusters, cluster):
    """The nodes whose rank 0 is in CLUSTER's communicator, in rank order."""
    return [j for j in range(nodes) if identity(j, nodes, clusters)['cluster'] == cluster]


def sample(name, labels, value):
    return '%s{%s} %s' % (name, ','.join('%s="%s"' % (k, esc(v)) for k, v in labels.items()), value)


def clusters_for(nodes):
    return max(1, (nodes + 249) // 250)


class Node:
    """One simulated agent: the lines it serves and how each value moves."""

    def __init__(self, i, n, gpus, clusters, rec):
        self.i = i
        ids = identity(i, n, clusters)
        self.cluster, self.name, self.instance, peer = ids['cluster'], ids['node'], ids['instance'], ids['peer']
        self.address, self.peer = ids['address'], peer
        self.faults = []
        self.comm_faults = []  # the rank_stuck faults of this node's communicator (its cluster)
        self.comm = {}  # the communicator labels of rank 0, set by the Fleet
        self.stalls = []  # [(fault, peer address)]: rank 0's end toward it in backoff while the fault lasts
        self.ranks = [{k: rank_labels(self.name, rank)[k] for k in IDENTITY} for rank in range(max(1, gpus))]  # the agent's order
        self.collective_peers = [sample('nccl_tcp_collective_peers', dict(ident, local_address=self.address, peer=p), 1)
                                 for ident in self.ranks for p in (ids['previous'], peer)]
        by_family = {}
        keys = sorted(set(rec.healthy) | set(rec.fault), key=lambda k: (k[0] != 'node', k))
        for rank in range(max(1, gpus)):
            ident = rank_labels(self.name, rank)
            factor = 0.8 + 0.4 * ((i * 7919 + rank * 104729) % 1000) / 1000.0
            for key in keys:
                part, name, extra = key
                if part == 'node' and rank:
                    continue  # the agent's own series, once per node
                if name in SYNTHETIC:
                    continue
                h, f = rec.healthy.get(key), rec.fault.get(key)
                names = (h or f)[0]
                if part == 'group':  # one series per node: every rank's share, summed in render()
                    labels = dict(extra, **{k: v for k, v in ident.items() if k != 'pid'})
                else:
                    labels = dict(extra, **(ident if part != 'node' else {}))
                if 'peer' in labels:
                    labels['peer'] = peer
                text = name + ('{%s}' % ','.join('%s="%s"' % (k, esc(labels[k])) for k in names) if names else '')
                kind = None
                if rank == 0 and part == 'gpu' and name.startswith(GPU_FAMILIES):
                    kind = 'gpu'
                elif rank == 0 and part == 'nccl':
                    kind = 'tcp'
                elif rank == 0 and part == 'group':
                    kind = 'gpu' if name.startswith(GPU_FAMILIES) else 'tcp'
                scale = 1.0 if part == 'node' else factor
                by_family.setdefault(family_of(name, rec.types), []).append((text, scale, h, f, kind))
        self.lines = [(fam, series) for fam, series in by_family.items()]
        self.headers = {fam: '\n'.join(rec.families.get(fam, [])) for fam in by_family}
        self.headers.update({fam: '\n'.join(rec.families.get(fam, ['# HELP %s %s' % (fam, text), '# TYPE %s %s' % (
                                 fam, 'counter' if fam.endswith('_total') else 'gauge')]))
                             for fam, text in SYNTHETIC.items()})

    def render(self, t):
        """The exposition at t seconds after start."""
        active = {f['kind']: f for f in self.faults if f['kind'] in ('gpu', 'tcp') and t >= f['start']}
        synthetic = self.synthetic(t)
        out = []
        for fam, series in self.lines:
            out.append(self.headers[fam])
            values = {}  # by text: a container's series gets each rank's share
            for text, scale, h, f, kind in series:
                fault = active.get(kind) if kind else None
                value = self.value(t, scale, h, f, fault)
                if value is not None:
                    values[text] = values.get(text, 0) + value
            out.extend('%s %s' % (text, repr(v) if isinstance(v, float) else v) for text, v in values.items())
            out.extend(synthetic.pop(fam, []))
        for fam, samples in synthetic.items():
            out.append(self.headers[fam])
            out.extend(samples)
        out.append('')
        return '\n'.join(out).encode()

    def synthetic(self, t):
        """{family: samples} of the synthesized series at t."""
        rank0 = self.ranks[0]
        # The rank's abort with its own sockets quiet: the agent counts it uncorrelated, the
        # series born at 1 (the recorded family; only the tcp fault serves its recorded series).
        aborts = [sample('nccl_tcp_uncorrelated_timeouts_total', dict(rank0, source='nccl', kind='abort'), 1)
                  for f in self.faults if f['kind'] == 'tcp_remote' and t >= f['start']]
        stalls = [sample('tcp_peer_stall_seconds', dict(rank0, local_address=self.address, peer=peer),
                         repr(round(STALL_AT_ABORT + t - f['start'], 3)))
                  for f, peer in self.stalls if f['start'] <= t < f['end']]
        progress, age = self.progress(t)
        comm = dict(rank0, **self.comm)
        return {'nccl_tcp_collective_peers': self.collective_peers, 'tcp_peer_stall_seconds': stalls,
                'nccl_tcp_uncorrelated_timeouts_total': aborts,
                'nccl_comm_collectives_total': [sample('nccl_comm_collectives_total', comm, progress)],
                'nccl_comm_last_collective_age_seconds': [sample('nccl_comm_last_collective_age_seconds', comm, repr(age))]}

    def progress(self, t):
        """Rank 0's collectives entered and its latest one's age at t. During a rank_stuck fault of
        its communicator every rank stops, the faulted one a collective short and the others
        waiting in the next; after it all go on from the same count."""
        for f in self.comm_faults:
            if t < f['start']:
                continue
            at_stop = int(COLLECTIVES_PER_S * f['start'])
            if t < f['end']:
                return at_stop - (f['node'] == self.i), round(t - f['start'], 3)
            return at_stop + int(COLLECTIVES_PER_S * (t - f['end'])), HEALTHY_AGE_S
        return int(COLLECTIVES_PER_S * t), HEALTHY_AGE_S

    @staticmethod
    def value(t, scale, h, f, fault):
        if fault is None or f is None:
            if h is None:
                return None  # a series only the fault creates
            _, v, rate = h
            return v if rate is None else int(scale * (v + rate * t))
        in_fault = min(t, fault['end']) - fault['start']
        _, vf, rate_f = f
        if rate_f is None:  # a gauge: the fault's value while it lasts, the healthy one after
            return vf if t < fault['end'] else (h[1] if h else None)
        base = int(scale * (h[1] + h[2] * fault['start'])) if h else int(vf)
        return base + int(rate_f * in_fault) + (int(scale * h[2] * (t - fault['start'] - in_fault)) if h else 0)


class Fleet:
    def __init__(self, args):
        rec = Recording(args.recordings)
        self.nodes = [Node(i, args.nodes, args.gpus, args.clusters, rec) for i in range(args.nodes)]
        self.faults = json.loads(args.faults)
        for cluster in sorted({n.cluster for n in self.nodes}):
            members = comm_members(args.nodes, args.clusters, cluster)
            stuck = [f for f in self.faults if f['kind'] == 'rank_stuck' and f['node'] in members]
            for rank, j in enumerate(members):
                self.nodes[j].comm = {'communicator': communicator_of(cluster), 'rank': str(rank), 'nranks': str(len(members))}
                self.nodes[j].comm_faults = stuck
        for f in self.faults:
            node = self.nodes[f['node']]
            node.faults.append(f)
            if f['kind'] == 'tcp':
                node.stalls.append((f, node.peer))
            elif f['kind'] == 'tcp_remote':  # the sender: the next node, toward this one
                sender = self.nodes[(f['node'] + 1) % len(self.nodes)]
                if sender.cluster != node.cluster:
                    sys.exit("tcp_remote on node %d: node %d is in another cluster, which the join "
                             "does not cross" % (f['node'], sender.i))
                sender.stalls.append((f, node.address))
        self.sd_file, self.port, self.t0 = args.sd_file, args.port, time.time()
        self.listed = None

    def active(self, node, kind, t):
        return any(f['kind'] == kind and f['start'] <= t < f['end'] for f in node.faults)

    def write_sd(self, t):
        """The file_sd target list: every node not 'gone' now (atomic rename: scrapers never see half a file)."""
        listed = [n.i for n in self.nodes if not self.active(n, 'gone', t)]
        if listed == self.listed:
            return
        groups = [{'targets': ['127.0.0.1:%d' % self.port],
                   'labels': {'__metrics_path__': '/node/%d/metrics' % i, 'cluster': self.nodes[i].cluster,
                              'node': self.nodes[i].name, 'instance': self.nodes[i].instance}} for i in listed]
        with open(self.sd_file + '.tmp', 'w') as f:
            json.dump(groups, f)
        os.rename(self.sd_file + '.tmp', self.sd_file)
        self.listed = listed

    def gone(self, node, t):
        return any(f['kind'] == 'gone' and f['start'] + GONE_AFTER_S <= t < f['end'] for f in node.faults)

    def answer(self, path):
        t = time.time() - self.t0
        m = re.match(r'^/node/(\d+)/metrics$', path)
        if not m or int(m.group(1)) >= len(self.nodes):
            return 404, b'no such node\n'
        node = self.nodes[int(m.group(1))]
        if self.gone(node, t):
            return 404, b'gone\n'
        if self.active(node, 'down', t):
            return 503, b'agent not answering\n'
        return 200, node.render(t)

    async def serve(self, reader, writer):
        try:
            while True:
                request = await reader.readuntil(b'\r\n\r\n')
                path = request.split(b' ', 2)[1].decode()
                status, body = self.answer(path)
                reason = {200: 'OK', 404: 'Not Found', 503: 'Service Unavailable'}[status]
                writer.write(b'HTTP/1.1 %d %s\r\nContent-Type: text/plain; version=0.0.4\r\n'
                             b'Content-Length: %d\r\n\r\n' % (status, reason.encode(), len(body)) + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def run(self):
        server = await asyncio.start_server(self.serve, '127.0.0.1', self.port, backlog=4096)
        self.port = server.sockets[0].getsockname()[1]
        self.t0 = time.time()
        self.write_sd(0)
        series = sum(1 for line in self.nodes[0].render(0).splitlines() if line and not line.startswith(b'#'))
        print("ready port=%d t0=%.3f series_per_node=%d" % (self.port, self.t0, series), flush=True)
        while True:  # discovery follows the 'gone' faults
            await asyncio.sleep(0.5)
            self.write_sd(time.time() - self.t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--nodes', type=int, default=1000)
    ap.add_argument('--gpus', type=int, default=8, help='ranks (GPU processes) per node')
    ap.add_argument('--clusters', type=int, default=0, help='default: one per 250 nodes')
    ap.add_argument('--port', type=int, default=0)
    ap.add_argument('--sd-file', required=True)
    ap.add_argument('--faults', default='[]')
    ap.add_argument('--recordings', default=os.path.join(HERE, 'recordings'))
    args = ap.parse_args()
    args.clusters = args.clusters or clusters_for(args.nodes)
    asyncio.run(Fleet(args).run())


if __name__ == '__main__':
    main()
