"""A witness of the kernel's TCP retransmit events that the agent did not produce, for the tests
that compare the agent's TCP counts with the kernel's (#47 item 1).

A tracefs instance of its own (mono clock, raw socket addresses) records every tcp_retransmit_skb
and tcp_retransmit_synack event on the host; beside it the run counts and recursion misses of the
agent's own programs on those tracepoints (by id, from the agent's fds: another agent on the
machine runs its own), read together in marks: the test takes one where it reads the kernel's
counter and the agent (mark(read=...)), and a thread takes one every SAMPLE_S. Between two marks
with no event near either the figures are exact, host-wide for each tracepoint:

    T (events tracefs recorded) = R (runs of the agent's program) + M (its recursion misses) + S

S counts the events the kernel fired and neither ran the agent's program for nor counted as
missed. For the test's own sockets (an address and port filter, own=: other traffic on the host
does not count) tracefs gives E events. Which events were skipped is narrowed down to the
sampled intervals whose runs fell short (S_own: at least the shortfall less the other sockets'
events there, at most the test's own events there), and, with the independent programs of
tests/agent/tcp_witness.bpf.c loaded (VIGIL_TCP_WITNESS_BPF, as CTest sets it), told event by
event: the events no BPF program on the tracepoint ran for.

check() holds a test to the equations: the agent's count A against the kernel's K in the test's
namespace; A == K exactly when no event of the test's was skipped, and otherwise only as the
skipped events explain (see check()).

kernel.bpf_stats_enabled is on while the witness lives (run counts need it) and restored after;
the instance and the witness programs are removed."""
import bisect
import collections
import ctypes
import itertools
import os
import re
import struct
import threading
import time

from vigil_harness.agent import held_bpf_ids, sh
from vigil_harness.fail import fail

TRACING = '/sys/kernel/tracing'
STATS = '/proc/sys/kernel/bpf_stats_enabled'
# The agent's program on each tracepoint: the tp_btf form, or its classic fallback (bpf/tcp.bpf.c).
AGENT_PROGRAMS = {'tcp_retransmit_skb': ('retransmit_btf', 'retransmit_tp'),
                  'tcp_retransmit_synack': ('synack_btf', 'synack_tp')}
# tests/agent/tcp_witness.bpf.c's programs, in the order of its enum witness_prog; the first two
# of each tracepoint are called by the tracepoint's bpf_trace_run probe as the agent's tp_btf
# program is, the third by the trace event's perf probe.
WITNESS_PROGRAMS = ('w_skb_btf', 'w_skb_raw', 'w_skb_tp', 'w_synack_btf', 'w_synack_raw', 'w_synack_tp',
                    'w_close_btf')
WITNESS_OF = {'tcp_retransmit_skb': WITNESS_PROGRAMS[:3], 'tcp_retransmit_synack': WITNESS_PROGRAMS[3:6]}
# A TCP socket's move to TCP_CLOSE (where the agent settles what its retransmit events missed):
# the instance records it (filtered in the kernel), and w_close_btf runs where BPF programs on
# that tracepoint do, the agent's set_state among them.
CLOSE = 'inet_sock_set_state'
CLOSE_FILTER = 'protocol == 6 && newstate == 7'  # IPPROTO_TCP, TCP_CLOSE (include/net/tcp_states.h)
CLOSE_WITNESS = 'w_close_btf'
LOG_PER_CPU = 16384  # tcp_witness.bpf.c
SAMPLE_S = 0.02
# An event this close to a mark may have run before or after its read of the run counts (the
# tracefs record and a program's run are two probes of one tracepoint call, microseconds apart;
# tracefs prints microseconds): the mark is then no boundary for that tracepoint.
GUARD_NS = 1000000
MATCH_NS = 200000  # a witness program's run and the tracefs record of one call
LINE = re.compile(r'^\s*(?P<task>.*?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<flags>\S+)\s+'
                  r'(?P<sec>\d+)\.(?P<usec>\d+):\s+(?P<event>\w+):\s+(?P<body>.*)$')
FIELD = re.compile(r'(\w+)=(\S+)')
PROG_INFO_SIZE = 232  # struct bpf_prog_info (Linux 6.x): name at 64, run_cnt at 200, recursion_misses at 208


class Event:
    """One line of the instance: when (mono ns, microseconds), where (CPU, the task it ran in or
    interrupted, irq flags: s = softirq), which tracepoint, and its fields."""

    def __init__(self, m):
        self.task, self.pid, self.cpu, self.flags = m.group('task'), int(m.group('pid')), int(m.group('cpu')), m.group('flags')
        self.ts = int(m.group('sec')) * 1000000000 + int(m.group('usec').ljust(9, '0')[:9])
        self.tracepoint = m.group('event')
        self.fields = dict(FIELD.findall(m.group('body')))
        self.sk = int(self.fields.get('skaddr', '0'), 16)  # inet_sock_set_state prints none: 0
        # The connection, as its end's socket sees it; with sk, one socket's life (a freed socket's
        # address is soon another connection's).
        self.conn = tuple(self.fields.get(k) for k in ('saddr', 'sport', 'daddr', 'dport'))
        self.line = m.group(0).strip()


def between(addresses, ports=(), saddr=None):
    """The test's own events: both ends among ADDRESSES; if PORTS is given, one end's port among
    them; if SADDR is given, sent from that address (one namespace's side). The addresses of a
    test's namespaces are its own, but another test may use the same ones in namespaces of its own."""
    addresses, ports = set(addresses), {str(p) for p in ports}

    def own(e):
        f = e.fields
        return (f.get('saddr') in addresses and f.get('daddr') in addresses
                and (not ports or f.get('sport') in ports or f.get('dport') in ports)
                and (saddr is None or f.get('saddr') == saddr))
    return own


def any_of(*preds):
    return lambda e: any(p(e) for p in preds)


class SocketsIn:
    """The test's own events: those of the TCP sockets of network namespace NS (the addresses and
    ports of both ends, as `ss` lists them: connected, closing, in TIME-WAIT), gathered at each
    refresh() and kept; where a socket may be gone by then (the passive closer of a short
    connection), ALSO (a predicate such as between()) adds its events."""

    def __init__(self, ns, also=None):
        self.ns, self.also, self.ends = ns, also, set()
        self.refresh()

    def refresh(self):
        out = sh('ip', 'netns', 'exec', self.ns, 'ss', '-Htan').stdout
        for f in (l.split() for l in out.splitlines()):
            if len(f) >= 5:
                (la, lp), (pa, pp) = (x.rsplit(':', 1) for x in f[3:5])
                self.ends.add((la.strip('[]'), lp, pa.strip('[]'), pp))
        return self

    def __call__(self, e):
        f = e.fields
        return ((f.get('saddr'), f.get('sport'), f.get('daddr'), f.get('dport')) in self.ends
                or bool(self.also and self.also(e)))


class Mark:
    """The agent's (runs, misses) per tracepoint and the witness programs' runs, read between t0
    and t1 (CLOCK_MONOTONIC ns), and the value of the read it bracketed."""

    def __init__(self, t0, t1, runs, witness, value=None):
        self.t0, self.t1, self.runs, self.witness, self.value = t0, t1, runs, witness, value


class _Libbpf:
    """The few libbpf calls the witness needs (the system's libbpf.so.1, through ctypes)."""

    def __init__(self):
        lib = ctypes.CDLL('libbpf.so.1', use_errno=True)
        P, I, U = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32
        for name, res, args in (('bpf_prog_get_fd_by_id', I, [U]), ('bpf_obj_get_info_by_fd', I, [I, P, P]),
                                ('bpf_map_lookup_elem', I, [I, P, P]), ('libbpf_num_possible_cpus', I, []),
                                ('libbpf_get_error', ctypes.c_long, [P]),
                                ('bpf_object__open_file', P, [ctypes.c_char_p, P]), ('bpf_object__load', I, [P]),
                                ('bpf_object__close', None, [P]),
                                ('bpf_object__find_map_by_name', P, [P, ctypes.c_char_p]),
                                ('bpf_object__find_program_by_name', P, [P, ctypes.c_char_p]),
                                ('bpf_map__set_max_entries', I, [P, U]), ('bpf_map__fd', I, [P]),
                                ('bpf_program__attach', P, [P]), ('bpf_link__destroy', I, [P])):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        self.lib = lib
        self.ncpu = lib.libbpf_num_possible_cpus()

    def prog_info(self, prog_id):
        """(name, run_cnt, recursion_misses) of program PROG_ID; None once it is gone. Its fd is
        held only for the read: the agent's programs must go when it stops."""
        fd = self.lib.bpf_prog_get_fd_by_id(prog_id)
        if fd < 0:
            return None
        try:
            buf = ctypes.create_string_buffer(PROG_INFO_SIZE)
            size = ctypes.c_uint32(PROG_INFO_SIZE)
            if self.lib.bpf_obj_get_info_by_fd(fd, buf, ctypes.byref(size)) != 0:
                return None
        finally:
            os.close(fd)
        return (buf.raw[64:80].split(b'\0')[0].decode(),) + struct.unpack_from('<QQ', buf.raw, 200)

    def percpu(self, fd, key):
        values = ctypes.create_string_buffer(8 * self.ncpu)
        k = ctypes.c_uint32(key)
        if self.lib.bpf_map_lookup_elem(fd, ctypes.byref(k), values) != 0:
            return [0] * self.ncpu
        return list(struct.unpack('<%dQ' % self.ncpu, values.raw))


class _WitnessPrograms:
    """tcp_witness.bpf.c loaded and attached: per program its runs, and a log of its runs."""

    def __init__(self, lib, path):
        self.lib, L = lib, lib.lib
        self.links = []
        self.obj = L.bpf_object__open_file(path.encode(), None)
        if not self.obj or L.libbpf_get_error(self.obj):
            fail('cannot open the witness object %s' % path)
        L.bpf_map__set_max_entries(L.bpf_object__find_map_by_name(self.obj, b'run_log'), lib.ncpu * LOG_PER_CPU)
        if L.bpf_object__load(self.obj) != 0:
            fail('cannot load the witness object %s: errno %d' % (path, ctypes.get_errno()))
        for name in WITNESS_PROGRAMS:
            link = L.bpf_program__attach(L.bpf_object__find_program_by_name(self.obj, name.encode()))
            if not link or L.libbpf_get_error(link):
                self.close()
                fail('cannot attach the witness program %s: errno %d' % (name, ctypes.get_errno()))
            self.links.append(link)
        fd = {m: L.bpf_map__fd(L.bpf_object__find_map_by_name(self.obj, m.encode()))
              for m in ('runs', 'next_slot', 'run_log')}
        self.runs_fd, self.slot_fd, self.log_fd = fd['runs'], fd['next_slot'], fd['run_log']

    def runs(self):
        return {name: sum(self.lib.percpu(self.runs_fd, i)) for i, name in enumerate(WITNESS_PROGRAMS)}

    def log(self):
        """{program: {cpu: sorted [(ts_ns, sk)]}} of the runs in the log, and per CPU the time
        from which its part of the log is complete (0 unless it wrapped)."""
        L = self.lib.lib
        slots = self.lib.percpu(self.slot_fd, 0)
        runs = collections.defaultdict(lambda: collections.defaultdict(list))
        by_cpu = collections.defaultdict(list)
        k, v = ctypes.c_uint32(), ctypes.create_string_buffer(24)
        for key in range(self.lib.ncpu * LOG_PER_CPU):
            k.value = key
            if L.bpf_map_lookup_elem(self.log_fd, ctypes.byref(k), v) == 0:
                ts, sk, prog, cpu = struct.unpack('<QQII', v.raw)
                if ts:
                    runs[WITNESS_PROGRAMS[prog]][cpu].append((ts, sk))
                    by_cpu[cpu].append(ts)
        for per_cpu in runs.values():
            for entries in per_cpu.values():
                entries.sort()
        complete_from = {cpu: (min(by_cpu[cpu]) if slots[cpu] > LOG_PER_CPU else 0) for cpu in range(self.lib.ncpu)}
        return runs, complete_from

    def close(self):
        for link in self.links:
            self.lib.lib.bpf_link__destroy(link)
        self.links = []
        self.lib.lib.bpf_object__close(self.obj)


class TcpWitness:
    """The witness, for `with`: watch(agent_pid) starts it on that agent's programs; mark(),
    account() and check() as the module says."""

    def __init__(self, tag, bpf_object=None):
        self.dir = os.path.join(TRACING, 'instances', 'vigil-witness-%s-%d' % (tag, os.getpid()))
        self.bpf_object = bpf_object if bpf_object is not None else os.environ.get('VIGIL_TCP_WITNESS_BPF')
        self.samples, self.lib, self.programs, self.ids = [], None, None, {}
        self._stop, self._thread, self._lock = threading.Event(), None, threading.Lock()

    def __enter__(self):
        with open(STATS) as f:
            self.stats_were = f.read().strip()
        with open(STATS, 'w') as f:
            f.write('1')
        os.mkdir(self.dir)
        try:
            for name, value in (('trace_clock', 'mono'), ('buffer_size_kb', '8192'), ('options/hash-ptr', '0')):
                with open(os.path.join(self.dir, name), 'w') as f:
                    f.write(value)
            self._enable('1')
            self.lib = _Libbpf()
            if self.bpf_object:
                self.programs = _WitnessPrograms(self.lib, self.bpf_object)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _enable(self, on):
        close = os.path.join(self.dir, 'events', 'sock', CLOSE)
        if on == '1':
            with open(os.path.join(close, 'filter'), 'w') as f:
                f.write(CLOSE_FILTER)
        for path in [os.path.join(self.dir, 'events', 'tcp', tp) for tp in AGENT_PROGRAMS] + [close]:
            with open(os.path.join(path, 'enable'), 'w') as f:
                f.write(on)

    def agent_programs(self, agent_pid):
        """{tracepoint: [program ids]} of the agent in process AGENT_PID (host pid), from its fds."""
        ids = {}
        for prog_id in sorted(held_bpf_ids(agent_pid, ('prog_id',))['prog_id']):
            info = self.lib.prog_info(prog_id)
            tracepoint = next((t for t, names in AGENT_PROGRAMS.items() if info and info[0] in names), None)
            if tracepoint:
                ids.setdefault(tracepoint, []).append(prog_id)
        if set(ids) != set(AGENT_PROGRAMS):
            fail('the agent (pid %d) holds no program on %s' % (agent_pid, sorted(set(AGENT_PROGRAMS) - set(ids))))
        return ids

    def watch(self, agent_pid):
        """Follows the programs of the agent in process AGENT_PID from now; sampling starts."""
        self.unwatch()
        self.ids = self.agent_programs(agent_pid)
        print('witness: tracefs instance %s, the agent\'s programs %s%s' % (
            self.dir, self.ids, ', witness programs %s' % ', '.join(WITNESS_PROGRAMS) if self.programs else
            ' (no witness programs: VIGIL_TCP_WITNESS_BPF unset)'), flush=True)
        self.samples = [self.mark()]
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(SAMPLE_S):
            m = self.mark()
            if None in m.runs.values():
                return  # a program is gone: its agent stopped, pins removed
            with self._lock:
                self.samples.append(m)

    def unwatch(self):
        """Stops the sampling (the marks taken stay)."""
        if self._thread:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def _counts(self, prog_ids):
        total = [0, 0]
        for prog_id in prog_ids:
            info = self.lib.prog_info(prog_id)
            if info is None:
                return None
            total[0] += info[1]
            total[1] += info[2]
        return tuple(total)

    def mark(self, read=None):
        """A Mark now; READ (the test's read of the kernel's counter and of the agent) runs inside it."""
        t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        value = read() if read else None
        runs = {t: self._counts(ids) for t, ids in self.ids.items()}
        witness = self.programs.runs() if self.programs else {}
        t1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        return Mark(t0, t1, runs, witness, value)

    def events(self):
        """Every event the instance holds, sorted by time, and per CPU the events its ring
        buffer lost (overruns, drops: then the witness is incomplete)."""
        with open(os.path.join(self.dir, 'trace')) as f:
            out = [Event(m) for m in (LINE.match(l) for l in f if not l.startswith('#')) if m]
        out.sort(key=lambda e: e.ts)
        lost = {}
        for cpu in sorted(os.listdir(os.path.join(self.dir, 'per_cpu'))):
            with open(os.path.join(self.dir, 'per_cpu', cpu, 'stats')) as f:
                stats = dict(l.split(':', 1) for l in f if ':' in l)
            n = int(stats.get('overrun', '0')) + int(stats.get('dropped events', '0'))
            if n:
                lost[cpu] = n
        return out, lost

    def unrun_tail(self, own):
        """unrun_tail() of everything recorded so far; empty without the witness programs."""
        if not self.programs:
            return []
        return unrun_tail(self.events()[0], own, self.programs.log())

    def settled_mark(self, read, own, limit_s=20):
        """mark(read=READ) repeated until no event of the test's own sockets (OWN) is near it:
        the test's read of the kernel and of the agent then falls between its events."""
        deadline = time.time() + limit_s
        while True:
            m = self.mark(read)
            time.sleep(2 * GUARD_NS / 1e9)
            events, _ = self.events()
            if not any(e.tracepoint in AGENT_PROGRAMS and own(e) and m.t0 - GUARD_NS <= e.ts <= m.t1 + GUARD_NS
                       for e in events):
                return m
            if time.time() > deadline:
                fail('witness: the test\'s sockets retransmitted at every read for %d s' % limit_s)
            time.sleep(0.05)

    def account(self, start, end, own):
        """The figures of [START, END] (Marks) per tracepoint, as a dict: host-wide T, R, M, S
        between the nearest marks at or outside the window that no event is near; the test's own
        events E (OWN: a predicate such as between()) and those near START or END; the sampled
        intervals whose runs fell short (short: [(events, runs + misses)]), S_own's bounds; with
        the witness programs, per program its runs and the events it has no run for (unrun)."""
        events, lost = self.events()
        with self._lock:
            marks = sorted(self.samples + [start, end], key=lambda m: m.t0)
        witness_log = self.programs.log() if self.programs else None
        out = {'lost_by_tracefs': lost}
        for tp in AGENT_PROGRAMS:
            evs = [e for e in events if e.tracepoint == tp]
            times = [e.ts for e in evs]

            def count(lo, hi):  # events with lo < ts < hi
                return bisect.bisect_left(times, hi) - bisect.bisect_right(times, lo)

            usable = [m for m in marks if m.runs.get(tp) is not None
                      and count(m.t0 - GUARD_NS - 1, m.t1 + GUARD_NS + 1) == 0]
            a = max((m for m in usable if m.t0 <= start.t0), key=lambda m: m.t0, default=None)
            b = min((m for m in usable if m.t0 >= end.t0), key=lambda m: m.t0, default=None)
            if a is None or b is None:
                fail('witness: no mark without a %s event near it at %s of the window'
                     % (tp, 'the start' if a is None else 'the end'))
            inside = evs[bisect.bisect_right(times, a.t1):bisect.bisect_left(times, b.t0)]
            runs, misses = b.runs[tp][0] - a.runs[tp][0], b.runs[tp][1] - a.runs[tp][1]
            mine = [e for e in evs if own(e) and start.t0 - GUARD_NS < e.ts < end.t1 + GUARD_NS]
            acc = {'T': len(inside), 'R': runs, 'M': misses, 'S': len(inside) - runs - misses, 'E': len(mine),
                   'near_reads': [e for e in mine if e.ts <= start.t1 + GUARD_NS or e.ts >= end.t0 - GUARD_NS],
                   'events': inside, 'own_events': mine,
                   # The test's events in the 5 s before the window: a count read too late misses them.
                   'before': [e for e in evs if own(e) and start.t0 - 5000000000 < e.ts <= start.t0 - GUARD_NS]}
            steps = [m for m in usable if a.t0 <= m.t0 <= b.t0]
            acc['short'] = []
            lo = hi = 0
            for m0, m1 in zip(steps, steps[1:]):
                got = evs[bisect.bisect_right(times, m0.t1):bisect.bisect_left(times, m1.t0)]
                ran = (m1.runs[tp][0] - m0.runs[tp][0]) + (m1.runs[tp][1] - m0.runs[tp][1])
                if ran != len(got):
                    acc['short'].append((got, ran))
                    n_own = sum(1 for e in got if own(e))
                    lo += max(0, len(got) - ran - (len(got) - n_own))
                    hi += min(len(got) - ran, n_own)
            acc['S_own'] = (lo, hi)
            if witness_log is not None:
                acc['witness'] = _witness_account(tp, a, b, inside, witness_log)
            if tp == 'tcp_retransmit_skb':
                # The closes of the test's sockets from the window's start on (a skipped event's
                # socket may close after the end's read), and whether a BPF program ran for each.
                acc['closes'] = [(e, _close_ran(e, mine, witness_log)) for e in events
                                 if e.tracepoint == CLOSE and own(e) and e.ts > start.t0 - GUARD_NS]
            out[tp] = acc
        return out

    def check(self, what, account, tracepoint, agent, kernel, unit, recovered=None):
        """Prints the figures and fails unless they hold. AGENT is the agent's count for the
        test's own sockets, KERNEL the kernel's in the test's namespace (RetransSegs, or for
        SYN-ACKs TCPSynRetrans), both read in the account's marks. UNIT 'events' (one count per
        event: SYN-ACKs): AGENT + S_own == KERNEL, S_own the test's skipped events (exact where
        attributable, else anywhere within its bounds). UNIT 'segments' (tcp_retransmit_skb: the
        agent adds a socket's tp->total_retrans growth at each event, so a skipped event's
        segments come with the socket's next run, or its close): AGENT == KERNEL unless a
        skipped event of the test's could be its socket's last one in the window and the socket
        did not close with a BPF program run for its close (where the agent settles it; RECOVERED,
        if given, says its socket closed under the agent: settled), then AGENT <= KERNEL."""
        a = account[tracepoint]
        s_lo, s_hi = a['S_own']
        unrun = _unrun(a)
        if unrun is not None and len(unrun) == a['S'] and a['S'] > 0:
            n_own = sum(1 for e in unrun if e in a['own_events'])
            s_lo = s_hi = n_own  # every BPF program skipped the same events: attributed one by one
        print('%s: %s' % (what, figures(account, tracepoint)))
        print('%s: agent %d, kernel %d (%s), the test\'s skipped events %s'
              % (what, agent, kernel, unit, s_lo if s_lo == s_hi else '%d..%d' % (s_lo, s_hi)), flush=True)
        problems = []
        if account['lost_by_tracefs']:
            problems.append('the tracefs instance lost events (per CPU: %s): the witness is incomplete'
                            % account['lost_by_tracefs'])
        if a['S'] < 0 or a['M'] < 0:
            problems.append('%d runs and misses for %d events: runs without an event' % (a['R'] + a['M'], a['T']))
        if a['near_reads']:
            problems.append('events of the test\'s sockets at a read (the counts are not of one moment): %s'
                            % [e.line for e in a['near_reads']])
        if a['S'] or a['M']:
            print(skipped_text(a), flush=True)
        if unit == 'events':
            if not s_lo <= kernel - agent <= s_hi:
                problems.append('agent %d + skipped %s != kernel %d' % (agent, (s_lo, s_hi), kernel))
        else:
            last = unsettled(a)
            if recovered:
                last = [e for e in last if not recovered(e)]
            if not last and agent != kernel:
                problems.append('agent %d != kernel %d, and no skipped event of the test\'s explains it' % (agent, kernel))
            elif agent > kernel:
                problems.append('agent %d > kernel %d' % (agent, kernel))
            elif agent < kernel:
                print('%s: %d segments short, explained by skipped events that were their sockets\' last: %s'
                      % (what, kernel - agent, [e.line for e in last]), flush=True)
        if a['S'] and unit == 'segments':
            for e in [x for got, _ in a['short'] for x in got if x in a['own_events']]:
                print('  the socket of %s after it:\n%s' % (e.line, after_text(a, e)), flush=True)
        if problems:
            if a['before']:
                print('%s: the test\'s events in the 5 s before the window (%d), the last: %s'
                      % (what, len(a['before']), [e.line for e in a['before'][-5:]]))
            fail('%s: %s' % (what, '; '.join(problems)))

    def __exit__(self, *exc):
        self.unwatch()
        if self.programs:
            self.programs.close()
        self._enable('0')
        os.rmdir(self.dir)
        with open(STATS, 'w') as f:
            f.write(self.stats_were)


def _ran_for(entries, ts, sock):
    """Whether a run in ENTRIES (one program's [(ts, sk)] on the event's CPU, sorted) is that of
    the event at TS on socket SOCK: its socket, within MATCH_NS."""
    i = bisect.bisect_left(entries, (ts - MATCH_NS, 0))
    return any(sk == sock for _, sk in itertools.takewhile(lambda x: x[0] <= ts + MATCH_NS, entries[i:]))


def _close_ran(close, retransmits, witness_log):
    """Whether a BPF program ran for CLOSE (a TCP_CLOSE event: tracefs prints no socket, the
    socket is that of the connection's retransmits in RETRANSMITS): True, False, or None where
    it cannot be judged (no witness programs, the log's horizon, no retransmit to name the socket)."""
    before = [e for e in retransmits if e.conn == close.conn and e.ts < close.ts]
    if witness_log is None or not before:
        return None
    runs_log, complete_from = witness_log
    if close.ts < complete_from.get(close.cpu, 0) + MATCH_NS:
        return None
    return _ran_for(runs_log.get(CLOSE_WITNESS, {}).get(close.cpu, []), close.ts, before[-1].sk)


def unrun_tail(events, own, witness_log):
    """The test's tcp_retransmit_skb events (OWN) that end EVENTS and that no witness program on the
    bpf_trace_run probe ran for, oldest first. The kernel's skips run no BPF program at all
    (docs/probes-agent.md), so the agent's did not run for them either: its timer state of that
    socket is the one before them. Empty when the latest event ran, or is older than the log's
    horizon (not judged: no lag is explained by it)."""
    runs_log, complete_from = witness_log
    mine = [e for e in events if e.tracepoint == 'tcp_retransmit_skb' and own(e)]
    tail = []
    for e in reversed(mine):
        if e.ts < complete_from.get(e.cpu, 0) + MATCH_NS:
            break
        if any(_ran_for(runs_log.get(prog, {}).get(e.cpu, []), e.ts, e.sk)
               for prog in WITNESS_OF['tcp_retransmit_skb'][:2]):
            break
        tail.append(e)
    return tail[::-1]


def _witness_account(tp, a, b, inside, witness_log):
    """Per witness program: its runs between marks A and B and the events in INSIDE it has no
    run for (matched on CPU and socket within MATCH_NS; events before its log's horizon are not
    judged)."""
    runs_log, complete_from = witness_log
    out = {}
    for prog in WITNESS_OF[tp]:
        per_cpu = runs_log.get(prog, {})
        used = set()
        unrun, judged = [], 0
        for e in inside:
            if e.ts < complete_from.get(e.cpu, 0) + MATCH_NS:
                continue
            judged += 1
            entries = per_cpu.get(e.cpu, [])
            i = bisect.bisect_left(entries, (e.ts - MATCH_NS, 0))
            hit = None
            while i < len(entries) and entries[i][0] <= e.ts + MATCH_NS:
                if (e.cpu, i) not in used and (tp != 'tcp_retransmit_skb' or entries[i][1] == e.sk):
                    if hit is None or abs(entries[i][0] - e.ts) < abs(entries[hit][0] - e.ts):
                        hit = i
                i += 1
            if hit is None:
                unrun.append(e)
            else:
                used.add((e.cpu, hit))
        out[prog] = {'runs': b.witness[prog] - a.witness[prog], 'unrun': unrun, 'judged': judged}
    return out


def _unrun(acc):
    """The events no witness program of the bpf_trace_run probe ran for (None without them)."""
    if 'witness' not in acc:
        return None
    progs = [p for p in acc['witness'] if not p.endswith('_tp')]
    sets = [set(map(id, acc['witness'][p]['unrun'])) for p in progs]
    both = set.intersection(*sets) if sets else set()
    return [e for e in acc['events'] if id(e) in both]


def _close_of(acc, e):
    """The first close of E's socket after E, and whether a BPF program ran for it; (None, None)
    while the socket is open (or without closes in ACC)."""
    return next(((c, ran) for c, ran in acc.get('closes', ()) if c.conn == e.conn and c.ts > e.ts), (None, None))


def _same_socket_later(acc, e):
    """The test's events on E's socket after E and before its close (the same address and the
    same connection: a freed socket's address is soon another's)."""
    close, _ = _close_of(acc, e)
    return [x for x in acc['own_events'] if x.sk == e.sk and x.conn == e.conn and x.ts > e.ts
            and (close is None or x.ts < close.ts)]


def possibly_last(acc):
    """The test's events (in ACC, an account's entry for a tracepoint) in short intervals that no
    later run of the test's on the same socket follows within the window: if one of them was the
    skipped one, the agent's latest state of that socket is an earlier event's."""
    short_ids = {id(e) for got, _ in acc['short'] for e in got}
    return [e for e in acc['own_events'] if id(e) in short_ids
            and not any(id(x) not in short_ids for x in _same_socket_later(acc, e))]


def unsettled(acc):
    """possibly_last() less the events whose socket then closed with a BPF program run for its
    close (the agent's settle_at_close added what its retransmit events missed): a skipped one
    of these leaves its segments uncounted."""
    return [e for e in possibly_last(acc) if _close_of(acc, e)[1] is not True]


def after_text(acc, e):
    """E's socket after E: its later retransmits and its close, each with whether a BPF program
    ran for it (as far as the witness can tell)."""
    close, ran = _close_of(acc, e)
    out = ['     ' + x.line for x in _same_socket_later(acc, e)]
    if close is not None:
        verdict = {True: 'yes', False: 'no', None: 'not judged'}[ran]
        out.append('     %s [a BPF program ran for it: %s]' % (close.line, verdict))
    return '\n'.join(out) or '     (nothing: the socket was still open at the end, not retransmitting)'


def figures(account, tracepoint):
    """The figures of an account for TRACEPOINT, in one line."""
    a = account[tracepoint]
    line = ('%s: host-wide events %d = runs %d + recursion misses %d + skipped %d; the test\'s own events %d'
            % (tracepoint, a['T'], a['R'], a['M'], a['S'], a['E']))
    if 'witness' in a:
        line += '; witness programs ran %s' % ', '.join(
            '%s %d (%d of %d events without a run)' % (p, w['runs'], len(w['unrun']), w['judged'])
            for p, w in a['witness'].items())
    if 'closes' in a:
        verdicts = [ran for _, ran in a['closes']]
        line += ('; the test\'s sockets closed %d times, a BPF program ran for %d, for none %d, not judged %d'
                 % (len(verdicts), verdicts.count(True), verdicts.count(False), verdicts.count(None)))
    return line


def skipped_text(acc):
    """Where the skipped events are: the short intervals' events (time, CPU, task, flags) and,
    with the witness programs, the events none of them ran for."""
    out = ['  intervals whose runs fell short (%d): S_own %s' % (len(acc['short']), acc['S_own'])]
    for got, ran in acc['short']:
        out.append('   %d events, %d runs + misses:' % (len(got), ran))
        out += ['     ' + e.line for e in got]
    unrun = _unrun(acc)
    if unrun is not None:
        out.append('  events no witness program on the bpf_trace_run probe ran for (%d):' % len(unrun))
        out += ['     ' + e.line for e in unrun]
    return '\n'.join(out)
