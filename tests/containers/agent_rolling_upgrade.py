#!/usr/bin/env python3
"""A rolling upgrade of the agent's container loses nothing (#29 item 4). The agent runs in its
image under the DaemonSet's flags (as agent_in_container) with its pins on the host's bpffs; a
stand-in CUDA workload runs in a container of its own, and a TCP sender in a container with its
own network namespace sends through 5 % loss to a receiver that reads slowly, so the transfer
outlives both agent changes below:

  1. the workload allocates 10 x 1 MiB under the first agent;
  2. the agent's container is replaced as a DaemonSet update does (SIGTERM, removed, a new
     container started) by a second image of it: another tag and image id (the first committed
     again with another version label);
  3. the workload frees 5 MiB and allocates 3 x 2 MiB under the new agent;
  4. the new agent's container is killed with SIGKILL and started again.

After each change the agent must report the workload's own live bytes and allocation count, the
sender's retransmits must equal the kernel's RetransSegs in its namespace once the transfer is
over, no counter may go down, and the new agents must have adopted the pinned TCP links. With
`--no-pins` (the agent before #29) the new agents start from 0.
usage: agent_rolling_upgrade.py CUDA_WORKLOAD FAKE_LIBCUDA TCP_BULK [--no-pins]
       (root, podman; images from images/build.sh)"""
import json
import os
import subprocess
import sys
import time

from agent_in_container import (C_ADDR, LOSS_PERCENT, ROOT, TAG, Scene, agent_args, http, podman,
                                retrans_segs, running, wait_http)
from vigil_harness.agent import parse_metrics, total
from vigil_harness.fail import fail, require_root
from vigil_harness.ports import listen_port

PORT = 5209
BYTES = 60 * 1024 * 1024
# The receiver reads 64 KiB every 10 ms (at most 6.5 MB/s): the transfer lasts about 10 s,
# through both agent changes; the sender blocks on the receive window meanwhile.
RECEIVER = '''
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('%s', %d)); s.listen(1); print('listening', flush=True)
c, _ = s.accept(); got = 0
while True:
    d = c.recv(65536)
    if not d: break
    got += len(d); time.sleep(0.01)
c.close(); print('received=%%d' %% got, flush=True)
''' % (C_ADDR, PORT)


def workload_image(version, files, entrypoint, user):
    """The agent's image plus FILES (host path -> image path): a workload image of this test."""
    image = 'localhost/vigil-test/%s:%s' % (os.path.basename(entrypoint), TAG)
    tmp = 'vigil-test-build-' + TAG
    podman('create', '--name', tmp, 'vigil/agent:' + version)
    try:
        for src, dst in files.items():
            podman('cp', os.path.realpath(src), tmp + ':' + dst)
        podman('commit', '--change', 'ENTRYPOINT ["%s"]' % entrypoint, '--change', 'CMD []',
               '--change', 'USER %s' % user, tmp, image)
    finally:
        podman('rm', '-f', tmp, check=False)
    return image


def second_image(version):
    """vigil/agent:VERSION committed again with another version label: a new image id and tag."""
    image = 'localhost/vigil-test/agent:%s-next-%s' % (version, TAG)
    tmp = 'vigil-test-next-' + TAG
    podman('create', '--name', tmp, 'vigil/agent:' + version)
    try:
        podman('commit', '--change', 'LABEL org.opencontainers.image.version=%s-next' % version, tmp, image)
    finally:
        podman('rm', '-f', tmp, check=False)
    return image


def start_agent(scene, port, image, pins):
    args = agent_args(scene, port) if pins else agent_args(scene, port) + ['--bpf-pin-root', '']
    image_at = next(i for i, a in enumerate(args) if a.startswith('vigil/agent:') or a.startswith('localhost/vigil'))
    args[image_at] = image
    t0 = time.time()
    podman('run', '-d', '--name', scene.agent, *args)
    if wait_http('http://127.0.0.1:%d/readyz' % port, 'agent', alive=lambda: running(scene.agent)) is None:
        fail('agent container exited: ' + podman('logs', scene.agent).stderr)
    return time.time() - t0


def step(w):
    w.stdin.write('\n')
    w.stdin.flush()
    return json.loads(w.stdout.readline())


def view(metrics_url, cuda_pid, sender_pid):
    s = parse_metrics(http(metrics_url))
    return {'live_bytes': total(s, 'gpu_memory_driver_allocated_bytes', pid=cuda_pid),
            'allocs': total(s, 'gpu_memory_allocations_total', pid=cuda_pid),
            'retransmits': total(s, 'tcp_retransmits_total', pid=sender_pid),
            'tcp_events': total(s, 'vigil_agent_events_total', set='tcp')}


def main():
    require_root()
    workload, libcuda, bulk = sys.argv[1], sys.argv[2], sys.argv[3]
    pins = '--no-pins' not in sys.argv[4:]
    with open(os.path.join(ROOT, 'CMakeLists.txt')) as f:
        version = next(l for l in f if l.startswith('project(vigil')).split('VERSION')[1].split()[0]
    if podman('image', 'exists', 'vigil/agent:' + version, check=False).returncode != 0:
        fail('image vigil/agent:%s missing (images/build.sh builds it)' % version)
    failures = []
    images = []
    cuda_name, sender_name = 'vigil-test-cuda-' + TAG, 'vigil-test-sender-' + TAG
    with Scene() as scene:
        try:
            images += [workload_image(version, {workload: '/usr/local/bin/cuda_workload',
                                                libcuda: '/usr/lib/x86_64-linux-gnu/libcuda.so.1'},
                                      '/usr/local/bin/cuda_workload', 65532),
                       workload_image(version, {bulk: '/usr/local/bin/tcp_bulk'}, '/usr/local/bin/tcp_bulk', 65532),
                       second_image(version)]
            cuda_image, sender_image, next_image = images
            port = listen_port()
            metrics_url = 'http://127.0.0.1:%d/metrics' % port
            start_agent(scene, port, 'vigil/agent:' + version, pins)
            w = subprocess.Popen(['podman', 'run', '-i', '--rm', '--name', cuda_name, '--network=none', '--read-only',
                                  '--cap-drop=all', cuda_image, 'restart'], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
            if not w.stdout.readline().startswith('ready'):
                fail('the CUDA workload container did not start')
            cuda_pid = int(podman('inspect', '--format', '{{.State.Pid}}', cuda_name).stdout.strip())
            deadline = time.time() + 30
            while 'probes attached in /proc/%d/map_files/' % cuda_pid not in podman('logs', scene.agent).stderr:
                if time.time() > deadline:
                    fail('agent did not attach to the stand-in driver in the workload container')
                time.sleep(0.3)
            truth = step(w)  # 10 x 1 MiB

            receiver = subprocess.Popen(['ip', 'netns', 'exec', scene.ns_c, sys.executable, '-c', RECEIVER],
                                        stdout=subprocess.PIPE, text=True)
            receiver.stdout.readline()
            scene.loss(LOSS_PERCENT)
            base = retrans_segs(scene.ns_w)
            podman('run', '-d', '--name', sender_name, '--network', 'ns:/run/netns/' + scene.ns_w, '--read-only',
                   '--cap-drop=all', sender_image, 'connect', C_ADDR, str(PORT), str(BYTES))
            sender_pid = int(podman('inspect', '--format', '{{.State.Pid}}', sender_name).stdout.strip())
            time.sleep(2)
            last = view(metrics_url, cuda_pid, sender_pid)
            print('first agent (vigil/agent:%s): workload %s; agent %s' % (version, truth, last))

            for change in ('upgrade to ' + next_image, 'SIGKILL'):
                t0 = time.time()
                if change == 'SIGKILL':
                    podman('kill', '-s', 'KILL', scene.agent)
                podman('rm', '-f', '-t', '30', scene.agent)  # SIGTERM first, as the kubelet does
                stopped = time.time() - t0
                ready = start_agent(scene, port, next_image, pins)
                said = [l for l in podman('logs', scene.agent).stderr.splitlines() if 'tracepoint links adopted' in l]
                if change != 'SIGKILL':
                    truth = step(w)  # 5 MiB freed, 3 x 2 MiB allocated
                time.sleep(1.5)
                now = view(metrics_url, cuda_pid, sender_pid)
                print('%s: the old container gone in %.1f s, the new one ready %.1f s later; %s; workload %s; '
                      'agent %s' % (change, stopped, ready, said, truth, now))
                if (now['live_bytes'], now['allocs']) != (truth['live_bytes'], truth['allocs']):
                    failures.append('%s: the agent reports %d bytes live and %d allocations, the workload %d and %d'
                                    % (change, now['live_bytes'], now['allocs'], truth['live_bytes'], truth['allocs']))
                for k, v in now.items():
                    if v < last[k]:
                        failures.append('%s: %s went down: %d -> %d' % (change, k, last[k], v))
                if not any('tcp: 8 tracepoint links adopted' in l for l in said):
                    failures.append('%s: the new agent did not adopt the pinned TCP links: %s' % (change, said))
                last = now

            code = podman('wait', sender_name).stdout.strip()
            out, _ = receiver.communicate(timeout=120)
            scene.loss(0)
            time.sleep(1.0)
            kernel = retrans_segs(scene.ns_w) - base
            now = view(metrics_url, cuda_pid, sender_pid)
            print('transfer over (sender exit %s, receiver %s): kernel RetransSegs %d, agent %d'
                  % (code, out.strip(), kernel, now['retransmits']))
            if code != '0' or 'received=%d' % BYTES not in out:
                failures.append('the transfer failed: sender exit %s, receiver %s' % (code, out.strip()))
            if kernel < 10:
                failures.append('only %d retransmits with %d%% loss' % (kernel, LOSS_PERCENT))
            if now['retransmits'] != kernel:
                failures.append('the agent counts %d retransmits of the sender, the kernel %d'
                                % (now['retransmits'], kernel))
            w.stdin.write('\n')
            w.stdin.flush()
            w.wait(timeout=30)
        finally:
            for name in (cuda_name, sender_name):
                podman('rm', '-f', name, check=False)
            for image in images:
                podman('rmi', '-f', image, check=False)
    if failures:
        fail('; '.join(failures))
    print('ok')


if __name__ == '__main__':
    main()
