"""vigil-agent run by a test or a benchmark: start it, scrape and parse /metrics, run workloads
under it, check its text with promtool."""
import contextlib
import difflib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

from vigil_harness.fail import fail
from vigil_harness.ports import listen_port

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
# Removing a uprobe waits for an RCU grace period, serialised in the kernel: about 0.1 s per link
# on an idle VM, several times that under load (docs/probes-agent.md, Shutdown).
STOP_TIMEOUT_S = 60
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Scrape(list):
    """[(name, {label: value}, float)] for every sample line, and in .families the names of the
    families the text declares (# TYPE), with samples or without."""
    families = frozenset()


def parse_metrics(text):
    """The Scrape of a /metrics text."""
    out = Scrape()
    declared = set()
    for line in text.splitlines():
        if line.startswith('# TYPE '):
            declared.add(line.split()[2])
        if not line or line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if not m:
            fail("unparsable metrics line: " + line)
        labels = dict(LABEL.findall(m.group(3) or ''))
        out.append((m.group(1), labels, float(m.group(4))))
    out.families = frozenset(declared)
    return out


def select(samples, name, **labels):
    return [(l, v) for n, l, v in samples if n == name and all(l.get(k) == str(w) for k, w in labels.items())]


def total(samples, name, require=False, **labels):
    """The sum of NAME's series with LABELS; 0 when none matches. With REQUIRE, none fails: a
    renamed or unexported family, or a label that changed, must not read as 0."""
    rows = select(samples, name, **labels)
    if require and not rows:
        fail(absent(samples, name, labels))
    return sum(v for _, v in rows)


def declared_total(samples, name, **labels):
    """total() of a family that has no series until its first event (attach failures, timeouts
    counted per process): 0 when no series matches, but the scrape must declare the family
    (# TYPE line), so a renamed or unexported one fails. The labels are not checked: pair it
    with a required total() of a companion series carrying them."""
    if name not in getattr(samples, 'families', ()):
        fail(absent(samples, name, labels, 'declared'))
    return total(samples, name, **labels)


def absent(samples, name, labels, what='with a series'):
    """Says that NAME{LABELS} is missing, and what the scrape has instead: NAME's label sets, or
    the families with a close name."""
    want = '%s{%s}' % (name, ', '.join('%s="%s"' % kv for kv in sorted(labels.items())))
    have = [l for n, l, _ in samples if n == name]
    if have:
        return "no series %s in the scrape; %s has %d, e.g. %s" % (want, name, len(have), have[:3])
    if name in getattr(samples, 'families', ()):
        return "no series %s in the scrape: the family is declared but has none" % want
    names = set(getattr(samples, 'families', ())) | {n for n, _, _ in samples}
    close = difflib.get_close_matches(name, sorted(names), n=5, cutoff=0.7)
    return "no family %s %s in the scrape (absent is not 0); close names in it: %s" % (
        want, what, ', '.join(close) or 'none')


class Agent:
    """vigil-agent on a random local port with the given YAML config (and extra command-line
    ARGS), stopped with SIGTERM."""

    def __init__(self, binary, config="", args=()):
        self.binary = binary
        self.args = list(args)
        # Pinned state stays out of a real deployment's /sys/fs/bpf/vigil and out of other tests':
        # an agent given no pin root gets its own, removed when it stops.
        self.own_pins = None
        if '--bpf-pin-root' not in self.args:
            self.own_pins = '/sys/fs/bpf/vigil-test-%d-%d' % (os.getpid(), id(self))
            self.args += ['--bpf-pin-root', self.own_pins]
        # A port taken meanwhile (a listener, or a client's ephemeral port) only means another try.
        for _ in range(5):
            if self._start(binary, config):
                return
            print("agent port %d was taken; trying another" % self.port, flush=True)
        fail("agent could not listen on 5 ports: " + self.log_text())

    def _start(self, binary, config):
        self.port = listen_port()
        self.cfg = tempfile.NamedTemporaryFile('w', suffix='.yaml', delete=False)
        self.cfg.write("listen: 127.0.0.1:%d\npoll_interval: 200ms\n%s" % (self.port, config))
        self.cfg.close()
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([binary, '--config', self.cfg.name] + self.args, stderr=self.log)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                if 'Address already in use' in self.log_text():
                    os.unlink(self.cfg.name)
                    return False
                fail("agent exited %d: %s" % (self.proc.returncode, self.log_text()))
            try:
                if self.get('/readyz') == 'ready\n':
                    return True
            except OSError:
                pass
            time.sleep(0.1)
        fail("agent not ready in 20 s: " + self.log_text())

    def get(self, path):
        with urllib.request.urlopen('http://127.0.0.1:%d%s' % (self.port, path), timeout=10) as r:
            return r.read().decode()

    def scrape(self):
        """/metrics parsed, after Prometheus' own parser accepted it (promtool_check_text): a
        scrape Prometheus would refuse fails every test, whatever the test looks at."""
        text = self.get('/metrics')
        promtool_check_text(text)
        return parse_metrics(text)

    def log_text(self):
        self.log.seek(0)
        return self.log.read().decode(errors='replace')

    def held_bpf_ids(self):
        """Program and link ids the agent holds (held_bpf_ids of its pid)."""
        return held_bpf_ids(self.proc.pid)

    def stop(self):
        held = self.held_bpf_ids() if self.proc.poll() is None else None
        if self.proc.poll() is None:
            start = time.time()
            self.proc.terminate()
            self.wait_stopped(STOP_TIMEOUT_S)
            print("agent stopped %.1f s after SIGTERM, %d links held" % (time.time() - start, len(held['link_id'])))
        os.unlink(self.cfg.name)
        if self.own_pins:
            remove_pins(self.binary, self.own_pins)
        if self.proc.returncode != 0:
            fail("agent exited %d after SIGTERM: %s" % (self.proc.returncode, self.log_text()))
        # Pinned links outlive the agent by design; once their pins are gone, so must they be.
        if self.own_pins:
            wait_released(held)

    def wait_stopped(self, seconds):
        """Waits SECONDS for the agent to exit after its SIGTERM; past them, fails with where each of
        its threads waits in the kernel (read before the SIGKILL) and its log."""
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            where = task_stacks(self.proc.pid)
            self.proc.kill()
            self.proc.wait()
            fail("agent did not stop within %d s of SIGTERM; its threads in the kernel then:\n%s\nits log:\n%s"
                 % (seconds, where, self.log_text()[-2000:]))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def task_stacks(pid):
    """Where each thread of process PID is in the kernel (name, wchan, /proc stack: root), read
    before a process that overran its time is killed, so that the failure names what it waited on."""
    def read(path):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError as e:
            return '(%s)' % e.strerror
    threads = []
    for tid in sorted(os.listdir('/proc/%d/task' % pid), key=int):
        task = '/proc/%d/task/%s/' % (pid, tid)
        threads.append('%s %s wchan=%s\n%s' % (tid, read(task + 'comm'), read(task + 'wchan'), read(task + 'stack')))
    return '\n'.join(threads)


def held_bpf_ids(pid, kinds=('prog_id', 'link_id')):
    """{kind: ids} of the BPF objects process PID holds, from its fd table (bpftool 7.1 lacks the
    pid view); KINDS are fdinfo keys: prog_id, link_id, map_id."""
    ids = {k: set() for k in kinds}
    fdinfo = '/proc/%d/fdinfo' % pid
    for fd in os.listdir(fdinfo):
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                for line in f:
                    key, _, value = line.partition(':')
                    if key in ids:
                        ids[key].add(int(value))
        except OSError:
            pass
    return ids


def wait_released(held, timeout=STOP_TIMEOUT_S):
    """Waits until none of the program and link ids in HELD (Agent.held_bpf_ids) is in the kernel:
    a link whose last pin went is released asynchronously, about 0.1 s per uprobe."""
    deadline = time.time() + timeout
    for kind, cmd in (('prog_id', 'prog'), ('link_id', 'link')):
        for i in sorted((held or {}).get(kind, ())):
            while sh('bpftool', cmd, 'show', 'id', str(i), check=False).returncode == 0:
                if time.time() > deadline:
                    fail("%s %d still in the kernel %d s after the agent exited and its pins were removed" % (cmd, i, timeout))
                time.sleep(0.1)


def restart_pins(test, argv):
    """(pins, root, agent args) of a restart test: its own pin root under /sys/fs/bpf, or no
    pinned state at all with --no-pins in ARGV (the agent before #29)."""
    pins = '--no-pins' not in argv
    root = '/sys/fs/bpf/vigil-test-%s-%d' % (test, os.getpid())
    return pins, root, ['--bpf-pin-root', root if pins else '']


def remove_pins(binary, root):
    """`vigil-agent --cleanup` of the pin root ROOT; returns how many pins it removed."""
    r = sh(binary, '--cleanup', '--bpf-pin-root', root, check=False)
    if r.returncode != 0 or os.path.exists(root):
        fail("vigil-agent --cleanup --bpf-pin-root %s: exit %d, %s%s" % (root, r.returncode, r.stdout, r.stderr))
    return int(r.stdout.split()[1])


def mapped_path(pid, name_prefix):
    """The path of the first file mapped by PID whose name starts with NAME_PREFIX."""
    with open('/proc/%d/maps' % pid, errors='surrogateescape') as f:  # paths are the workload's bytes
        for line in f:
            path = line.split(None, 5)[5].strip() if len(line.split(None, 5)) == 6 else ''
            if os.path.basename(path).startswith(name_prefix):
                return path
    fail("pid %d maps no %s" % (pid, name_prefix))


def run_workload(agent, argv, set_name, library, env=None, timeout=15):
    """Starts a stand-in workload that prints 'ready', waits until the agent has attached SET_NAME's
    probes to the LIBRARY it maps, lets it run (a line on stdin) and returns (process, the JSON
    account it prints: the truth). A second line on its stdin lets it exit."""
    w = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    if not w.stdout.readline().startswith('ready'):
        fail("workload did not start: %s" % argv)
    wait_attached(agent, set_name, mapped_path(w.pid, library), timeout)
    w.stdin.write('\n')
    w.stdin.flush()
    return w, json.loads(w.stdout.readline())


@contextlib.contextmanager
def named_copy(binary, name):
    """BINARY copied as NAME (at most 15 bytes: a process's comm) into a temporary directory, its
    path yielded: the series the agent groups by program (comm) are then the test's own, not those
    of another process of the same program on the machine."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, name)
        shutil.copy(binary, path)
        yield path


def exit_workload(w):
    """Lets a stand-in workload started by run_workload exit (its second stdin line) and reaps it."""
    w.stdin.write('\n')
    w.stdin.flush()
    w.wait(timeout=10)


def wait_attached(agent, set_name, path, timeout=15):
    """Waits until the agent has attached SET_NAME's probes to the file at PATH (as a process
    maps it). Other processes on a shared machine may have made the agent attach elsewhere, so
    the count of links alone does not say this file is covered."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(('%s: ' % set_name) in l and 'probes attached in' in l and l.endswith(path)
               for l in agent.log_text().splitlines()):
            return
        time.sleep(0.2)
    fail("agent did not attach %s probes to %s within %d s: %s" % (set_name, path, timeout, agent.log_text()))


def sh(*args, check=True, **kw):
    return subprocess.run(args, check=check, capture_output=True, text=True, **kw)


def promtool_check_text(text):
    """`promtool check metrics` on a scrape's text: Prometheus' parser and naming conventions. On
    the GPU machine (VIGIL_CUDA_LIBDIR or VIGIL_PROMTOOL_OPTIONAL set by its scripts) promtool may
    be missing: the text format does not depend on the driver, and the stand-in runs check it."""
    try:
        r = subprocess.run(['promtool', 'check', 'metrics'], input=text, capture_output=True, text=True)
    except FileNotFoundError:
        if os.environ.get('VIGIL_CUDA_LIBDIR') or os.environ.get('VIGIL_PROMTOOL_OPTIONAL'):
            return False
        fail("promtool not installed (Debian package prometheus)")
    if r.returncode != 0:
        fail("promtool check metrics: %s%s" % (r.stdout, r.stderr))
    return True


def promtool_check(agent):
    """promtool_check_text on a live scrape, said in the test's output."""
    text = agent.get('/metrics')
    if promtool_check_text(text):
        print("promtool check metrics: ok (%d lines)" % len(text.splitlines()))
