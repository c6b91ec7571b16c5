#!/usr/bin/env python3
"""Container and pod labels from real cgroups: the workload is moved into a cgroup laid out as the
kubelet's systemd driver names them (kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope)
before it touches CUDA; the agent's series for its pid must carry that container id and pod UID,
and the namespace, pod and container names of a kubelet-style container log link
(<pod>_<namespace>_<container>-<id>.log in a directory laid out for the run, as
/var/log/containers on a node). The cgroups are made for the run (cgroup v2 if mounted, else v1
pids) and always removed.
usage: container_labels.py VIGIL_AGENT CUDA_WORKLOAD"""
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import uuid

from vigil_harness.agent import Agent, mapped_path, select, wait_attached
from vigil_harness.fail import fail, require_root


def cgroup_root():
    for root in ('/sys/fs/cgroup/unified', '/sys/fs/cgroup', '/sys/fs/cgroup/pids'):
        if os.path.exists(os.path.join(root, 'cgroup.procs')) and os.access(root, os.W_OK):
            return root
    fail("no writable cgroup hierarchy")


def main():
    require_root()
    agent_bin, workload = sys.argv[1], sys.argv[2]
    pod_uid, container = str(uuid.uuid4()), secrets.token_hex(32)
    root = cgroup_root()
    parts = ['vigil-test-%d.slice' % os.getpid(), 'kubepods-besteffort-pod%s.slice' % pod_uid.replace('-', '_'),
             'cri-containerd-%s.scope' % container]
    dirs = [os.path.join(root, *parts[:i + 1]) for i in range(len(parts))]
    w = None
    try:
        for d in dirs:
            os.mkdir(d)
        logs = '/tmp/vigil-container-logs-%d' % os.getpid()
        os.makedirs(logs)
        # What a kubelet links for this container (a second, unrelated one beside it).
        open(os.path.join(logs, 'trainer-7f9c-0_ml-research_main-%s.log' % container), 'w').close()
        open(os.path.join(logs, 'other_kube-system_x-%s.log' % secrets.token_hex(32)), 'w').close()
        with Agent(agent_bin, 'probes: {tcp: false, nccl: false}\nkubernetes: {container_logs: %s}\n' % logs) as agent:
            w = subprocess.Popen([workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            w.stdout.readline()
            with open(os.path.join(dirs[-1], 'cgroup.procs'), 'w') as f:
                f.write(str(w.pid))
            wait_attached(agent, 'cuda', mapped_path(w.pid, 'libcuda.so'))
            w.stdin.write('\n')
            w.stdin.flush()
            truth = json.loads(w.stdout.readline())
            time.sleep(0.5)
            rows = select(agent.scrape(), 'gpu_memory_allocations_total', pid=truth['pid'])
            if not rows:
                fail("no series for the workload")
            labels = rows[0][0]
            print("cgroup %s\nlabels container_id=%s pod_uid=%s" % ('/'.join(parts), labels['container_id'], labels['pod_uid']))
            if labels['container_id'] != container or labels['pod_uid'] != pod_uid:
                fail("labels do not match the cgroup (container %s, pod %s)" % (container, pod_uid))
            names = (labels.get('namespace'), labels.get('pod'), labels.get('container'))
            print("labels namespace=%s pod=%s container=%s" % names)
            if names != ('ml-research', 'trainer-7f9c-0', 'main'):
                fail("namespace/pod/container %s do not match the kubelet's link name" % (names,))
            w.stdin.write('\n')
            w.stdin.flush()
            w.wait(timeout=10)
    finally:
        shutil.rmtree('/tmp/vigil-container-logs-%d' % os.getpid(), ignore_errors=True)
        if w and w.poll() is None:
            w.kill()
            w.wait()
        for d in reversed(dirs):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # the exited workload leaves the cgroup asynchronously
    print("ok")


if __name__ == '__main__':
    main()
