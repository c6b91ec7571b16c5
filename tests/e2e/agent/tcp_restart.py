#!/usr/bin/env python3
"""A restart of the agent neither loses nor double-counts TCP retransmits (#29). One sender in a
network namespace keeps one connection open to a receiver in another, through 5 % loss, and sends
in steps; the kernel's RetransSegs in the sender's namespace is the truth. The agent is stopped
with SIGTERM, then killed with SIGKILL, and between each stop and the next agent's start the
sender sends a step with no agent running at all. After every step the agent's
tcp_retransmits_total for the sender must equal the kernel's count exactly, and no counter (the
sender's retransmits, vigil_agent_events_total, vigil_agent_ringbuf_drops_total,
vigil_agent_table_full_total of the tcp set) may go down: the maps and the tracepoint links are
pinned, so the kernel keeps counting while no agent runs, and the next agent adopts the links
instead of attaching a second time (which would count twice). Without pins (`--no-pins`, what the
agent did before) the restarted agent starts the sender's count from 0. Last, the pinned peers map is replaced by one of another
layout: the next agent says so, counts unpinned, and replaces the pinned links (their programs use
the old maps) instead of leaving them running beside its own.
While no agent runs after the SIGTERM, EXECS processes are started: their exec events wait in the
proc set's pinned ring and the next agent reads every one of them (before: a new ring, none).
With pins, a witness of the retransmit tracepoint (pylib/vigil_harness/tcp_witness.py) follows the
first agent's programs, which the pinned links keep running through both restarts (each next agent
must run those very programs), and holds every count to the kernel's: equal exactly unless the
kernel skipped the program for the sender's latest retransmit, which it then names.
usage: tcp_restart.py VIGIL_AGENT EXEC_STORM [--no-pins]"""
import json
import os
import signal
import subprocess
import sys
import time

from vigil_harness.agent import Agent, remove_pins, restart_pins, select, sh, total
from vigil_harness.fail import fail, require_root
from vigil_harness.netns import A_ADDR, B_ADDR, LOSS_PERCENT, Namespaces, retrans_segs
from vigil_harness.tcp_witness import TcpWitness, between

STEP = 8 * 1024 * 1024
PORT = 5207
CONFIG = 'probes: {nccl: false, usdt: false}\ngrace_period: 5m\n'  # cuda on: the proc set loads with it
EXECS = 2000  # about 1.5 s of process starts here; the ring holds 65,536 events
SELF_COUNTERS = ('vigil_agent_events_total', 'vigil_agent_ringbuf_drops_total', 'vigil_agent_table_full_total')

# The receiver answers one byte per STEP bytes received: the sender's step is over once every byte
# arrived (and was acknowledged with the answer), so no retransmit of it can come later.
RECEIVER = '''
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('%s', %d)); s.listen(1); print('listening', flush=True)
c, _ = s.accept(); got = 0
while True:
    d = c.recv(1 << 20)
    if not d: break
    got += len(d)
    while got >= %d: got -= %d; c.sendall(b'k')
''' % (B_ADDR, PORT, STEP, STEP)
SENDER = '''
import socket, sys
c = socket.create_connection(('%s', %d)); print('connected', flush=True)
for _ in sys.stdin:
    c.sendall(b'x' * %d)
    if c.recv(1) != b'k': sys.exit('no answer')
    print('sent', flush=True)
''' % (B_ADDR, PORT, STEP)


def send_step(sender):
    sender.stdin.write('\n')
    sender.stdin.flush()
    if sender.stdout.readline().strip() != 'sent':
        fail('the sender stopped')


def view(agent, pid):
    s = agent.scrape()
    out = {'retransmits': total(s, 'tcp_retransmits_total', pid=pid)}
    for probe_set in ('tcp', 'proc'):
        for name in SELF_COUNTERS:
            rows = select(s, name, set=probe_set)
            if len(rows) != 1:
                fail('want one %s{set="%s"} series, got %s' % (name, probe_set, rows))
            out['%s{set="%s"}' % (name, probe_set)] = rows[0][1]
    return out


def ring_read(agent):
    """Process events this agent has read from the proc set's ring."""
    return total(agent.scrape(), 'vigil_agent_ringbuf_events_total', set='proc')


def kernel_links():
    return json.loads(sh('bpftool', '-j', 'link', 'show').stdout)


def links_running(agent, name):
    """Ids of the links AGENT holds (its fd table) that run a program called NAME: another agent on
    the machine runs its own."""
    progs = {p['id'] for p in json.loads(sh('bpftool', '-j', 'prog', 'show').stdout) if p.get('name') == name}
    held = agent.held_bpf_ids()['link_id']
    return {l['id'] for l in kernel_links() if l['id'] in held and l.get('prog_id') in progs}


def mismatch(agent, agent_bin, args, root, failures):
    """The pinned peers map replaced by one of another layout: the next agent cannot reuse the
    maps, so the pinned links (whose programs use the old maps) must be replaced, not left
    running beside its own. Returns the agent now running."""
    before = links_running(agent, 'send_reset')
    agent.stop()
    peers = os.path.join(root, 'v1', 'tcp', 'peers')
    os.unlink(peers)
    sh('bpftool', 'map', 'create', peers, 'type', 'hash', 'key', '4', 'value', '8', 'entries', '1', 'name', 'peers')
    agent = Agent(agent_bin, CONFIG, args)
    said = [l for l in agent.log_text().splitlines() if 'tcp:' in l]
    running = links_running(agent, 'send_reset')
    # The pinned link the previous agent ran must be gone, not left beside the new agent's.
    left = before & {l['id'] for l in kernel_links()}
    print('pinned peers of another layout: the agent said %s; links running send_reset: previous agent %s '
          '(still in the kernel: %s), this agent %s' % (said, sorted(before), sorted(left), sorted(running)))
    if not any('do not match this build' in l for l in said) or not any('8 replaced' in l for l in said) \
            or len(before) != 1 or left or len(running) != 1:
        failures.append('pinned maps of another layout: said %s, the previous agent ran send_reset in links %s, '
                        '%s of them still in the kernel, this agent runs it in %s (want one link, the old one gone)'
                        % (said, sorted(before), sorted(left), sorted(running)))
    return agent


def same_programs(witness, agent, name):
    """The agent runs the programs the witness follows (adopted from the pinned links)."""
    held = witness.agent_programs(agent.proc.pid)
    missing = {t: ids for t, ids in witness.ids.items() if not set(ids) <= set(held.get(t, ()))}
    if missing:
        fail('%s: the agent does not hold the programs the pinned links ran (%s); it holds %s' % (name, missing, held))


def main():
    require_root()
    agent_bin, exec_storm = sys.argv[1], sys.argv[2]
    pins, root, args = restart_pins('tcp-restart', sys.argv[3:])
    failures = []
    own = between((A_ADDR, B_ADDR), ports=(PORT,))
    with TcpWitness('tcp-restart') as witness, Namespaces() as nets:
        receiver = subprocess.Popen(['ip', 'netns', 'exec', nets.b, sys.executable, '-c', RECEIVER],
                                    stdout=subprocess.PIPE, text=True)
        receiver.stdout.readline()
        agent = Agent(agent_bin, CONFIG, args)
        # Connected under the first agent: its owner and peer are known from the start.
        sender = subprocess.Popen(['ip', 'netns', 'exec', nets.a, sys.executable, '-c', SENDER],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            sender.stdout.readline()
            if pins:
                witness.watch(agent.proc.pid)
            # The agent's count of the sender from here, as the kernel's (a spurious timeout while
            # it connected is in both totals, not in the kernel's difference).
            start = witness.settled_mark(lambda: (retrans_segs(nets.a), view(agent, sender.pid)), own)
            base, agent_base = start.value[0], start.value[1]['retransmits']
            nets.nft(nets.b, LOSS_PERCENT)
            send_step(sender)
            time.sleep(0.5)
            end = witness.settled_mark(lambda: (retrans_segs(nets.a), view(agent, sender.pid)), own)
            last = end.value[1]
            truth = end.value[0] - base
            dropped = nets.dropped(nets.b)
            print('first agent: kernel RetransSegs %d, agent %s; the loss rule dropped %d packets' % (truth, last, dropped))
            if truth < 10:
                fail('only %d retransmits with %d%% loss: the loss rule dropped %d packets of the step' %
                     (truth, LOSS_PERCENT, dropped))
            if pins:
                witness.check('first agent', witness.account(start, end, own), 'tcp_retransmit_skb',
                              last['retransmits'] - agent_base, truth, 'segments')
            for name, how in (('SIGTERM', signal.SIGTERM), ('SIGKILL', signal.SIGKILL)):
                t0 = time.time()
                if how == signal.SIGTERM:
                    agent.stop()
                else:
                    agent.proc.send_signal(how)
                    agent.proc.wait(timeout=60)
                    os.unlink(agent.cfg.name)
                send_step(sender)  # no agent runs
                gap = retrans_segs(nets.a) - base - truth
                if how == signal.SIGTERM:
                    storm = subprocess.run([exec_storm, str(EXECS), '4'], check=True, capture_output=True, text=True)
                agent = Agent(agent_bin, CONFIG, args)
                if pins:
                    same_programs(witness, agent, name)
                if how == signal.SIGTERM:
                    time.sleep(0.5)
                    read = ring_read(agent)
                    print('%s: exec storm while no agent ran: %s; the next agent read %d process events from '
                          'the ring' % (name, storm.stdout.strip(), read))
                    if read < EXECS:
                        failures.append('%s: %d processes started while no agent ran; the next agent read %d '
                                        'process events' % (name, EXECS, read))
                print('%s: %d retransmits while no agent ran; the next agent ready %.2f s after the stop; its log: %s'
                      % (name, gap, time.time() - t0,
                         [l for l in agent.log_text().splitlines() if 'tcp:' in l]))
                for stage in ('after the restart', 'after a step under the new agent'):
                    if stage != 'after the restart':
                        send_step(sender)
                    time.sleep(0.5)
                    end = witness.settled_mark(lambda: (retrans_segs(nets.a), view(agent, sender.pid)), own)
                    now, truth = end.value[1], end.value[0] - base
                    print('%s, %s: kernel RetransSegs %d, agent %s' % (name, stage, truth, now))
                    if pins:  # the whole run so far: the same programs ran throughout
                        witness.check('%s, %s' % (name, stage), witness.account(start, end, own),
                                      'tcp_retransmit_skb', now['retransmits'] - agent_base, truth, 'segments')
                    elif now['retransmits'] - agent_base != truth:
                        failures.append('%s, %s: the agent counts %d retransmits, the kernel %d'
                                        % (name, stage, now['retransmits'], truth))
                    for counter, value in now.items():
                        if value < last[counter]:
                            failures.append('%s, %s: %s went down: %d -> %d'
                                            % (name, stage, counter, last[counter], value))
                    last = now
            if pins:
                witness.unwatch()  # the mismatch replaces the programs it follows
                agent = mismatch(agent, agent_bin, args, root, failures)
        finally:
            sender.kill()
            receiver.kill()
            agent.stop()
            if pins:
                print('vigil-agent --cleanup removed %d pins' % remove_pins(agent_bin, root))
    if failures:
        fail('; '.join(failures))
    print('ok')


if __name__ == '__main__':
    main()
