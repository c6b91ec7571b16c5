"""A worker's tensor-parallel group as the e2e tests run it: two `vigil-worker serve --tp 2` ranks
in the two network namespaces of vigil_harness.netns (rank 0 in A, rank 1 in B, Gloo over the
veth between them), and completions sent to rank 0 from inside its namespace."""
import os
import signal
import subprocess
import threading
import time

from vigil_harness.fail import fail
from vigil_harness.netns import A_ADDR, B_ADDR
from vigil_harness.worker_client import LISTENING


class Rank:
    """One `vigil-worker serve --tp 2` rank inside a namespace, its collectives timing out after
    TIMEOUT_S; stderr kept."""

    def __init__(self, ns, worker, model, rank, store, addr, config, timeout_s):
        args = ['ip', 'netns', 'exec', ns, worker, 'serve', '-m', model, '--port', '0', '--config', config,
                '--tp', '2', '--rank', str(rank), '--tp-store', store, '--tp-host', addr,
                '--tp-timeout', '%ds' % timeout_s]
        self.ns = ns
        self.rank = rank
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)  # `ip netns exec` execs: same pid
        self.pid = self.proc.pid
        self.log, self.port = [], None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line)
            m = LISTENING.search(line)
            if m:
                self.port = int(m.group(1))

    def wait_exit(self, limit):
        try:
            return self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.proc.kill()
        self.proc.wait()


def start_group(nets, worker, model, tmp, name, timeout_s):
    """Ranks 0 and 1 of a new group in NETS (a Namespaces), rendezvous in the store TMP/NAME, the
    worker's config TMP/worker.yaml; returns once rank 0 listens."""
    store = os.path.join(tmp, name)
    os.makedirs(store)
    config = os.path.join(tmp, 'worker.yaml')
    r1 = Rank(nets.b, worker, model, 1, store, B_ADDR, config, timeout_s)
    r0 = Rank(nets.a, worker, model, 0, store, A_ADDR, config, timeout_s)
    end = time.time() + 60
    while r0.port is None and time.time() < end and r0.proc.poll() is None:
        time.sleep(0.05)
    if r0.port is None:
        fail('rank 0 did not start: ' + ''.join(r0.log) + ''.join(r1.log))
    return r0, r1


def complete(r0, max_tokens, background=False, stream_to=subprocess.DEVNULL):
    """A greedy streamed completion through curl inside rank 0's namespace (its HTTP port is local
    there): in the BACKGROUND, curl's Popen writing the stream to STREAM_TO (a file; a pipe nobody
    reads would stall the generation); else its pid and output once it is done."""
    body = '{"prompt": "Once upon a time", "max_tokens": %d, "temperature": 0, "ignore_eos": true, "stream": true}' \
        % max_tokens
    cmd = ['ip', 'netns', 'exec', r0.ns, 'curl', '-sN', '-m', '120', 'http://127.0.0.1:%d/v1/completions' % r0.port,
           '-H', 'Content-Type: application/json', '-d', body]
    if background:
        return subprocess.Popen(cmd, stdout=stream_to, stderr=subprocess.DEVNULL)
    curl = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return curl.pid, curl.communicate()[0]
