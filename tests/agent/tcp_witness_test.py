#!/usr/bin/env python3
"""The TCP witness's accounting (pylib/vigil_harness/tcp_witness.py) on hand-made marks and
tracefs lines, without root: events the agent's program ran for, an event of the test's it did not
run for (made up for by its socket's next one, or its socket's last), another socket's skipped
event, SYN-ACKs counted one per event, a read taken while the test's socket retransmitted, and a
socket's close (settled there unless the kernel ran no program for the close either; a freed
socket's address reused by the next connection is not the same socket). A skip the agent cannot
see must be named, and must not pass as equality."""
import contextlib
import io
import unittest

from vigil_harness import tcp_witness as tw

MS = 1000000
LINE = ('{task}-{pid} [{cpu:03d}] ..s1. {sec}.{usec:06d}: {tp}: skbaddr=ffff1 skaddr={sk} family=AF_INET '
        'sport={sport} dport={dport} saddr={saddr} daddr={daddr} saddrv6=::1 daddrv6=::1 state=TCP_ESTABLISHED err=0')
CLOSE_LINE = ('{task}-{pid} [{cpu:03d}] ..s1. {sec}.{usec:06d}: inet_sock_set_state: family=AF_INET '
              'protocol=IPPROTO_TCP sport={sport} dport={dport} saddr=10.0.0.1 daddr=10.0.0.2 saddrv6=::1 '
              'daddrv6=::1 oldstate=TCP_CLOSING newstate=TCP_CLOSE')
OWN = tw.between(('10.0.0.1', '10.0.0.2'), ports=(5201,))


def event(t_ms, sk='ffff8881', sport=5201, tp='tcp_retransmit_skb', saddr='10.0.0.1', dport=40000):
    ns = int(t_ms * MS)
    text = LINE.format(task='tcp_bulk', pid=7, cpu=0, sec=ns // 1000000000, usec=ns % 1000000000 // 1000, tp=tp,
                       sk=sk, sport=sport, dport=dport, saddr=saddr, daddr='10.0.0.2')
    return tw.Event(tw.LINE.match(text))


def close(t_ms, dport=40000):
    ns = int(t_ms * MS)
    text = CLOSE_LINE.format(task='tcp_bulk', pid=7, cpu=0, sec=ns // 1000000000, usec=ns % 1000000000 // 1000,
                             sport=5201, dport=dport)
    return tw.Event(tw.LINE.match(text))


class FakeWitness(tw.TcpWitness):
    """Marks every 10 ms (from 1000 ms) whose runs are the events before them less SKIPPED."""

    def __init__(self, events, skipped=(), log=None):
        super().__init__('test', bpf_object='')
        self._events = sorted(events, key=lambda e: e.ts)
        self.skipped = {id(e) for e in skipped}
        self.programs = FakePrograms(log) if log else None
        self.samples = [self.at(t) for t in range(1000, 1200, 10)]

    def at(self, t_ms, value=None):
        t0 = int(t_ms * MS)
        runs = {tp: (sum(1 for e in self._events if e.tracepoint == tp and e.ts < t0
                         and id(e) not in self.skipped), 0) for tp in tw.AGENT_PROGRAMS}
        return tw.Mark(t0, t0 + 100000, runs, {p: 0 for p in tw.WITNESS_PROGRAMS} if self.programs else {}, value)

    def events(self):
        return self._events, {}


class FakePrograms:
    """The witness programs' log of a FakeWitness."""

    def __init__(self, log):
        self._log = log

    def log(self):
        return self._log


def verdict(w, start, end, tp, agent, kernel, unit):
    """'ok' or the FAIL line of check()."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            w.check('case', w.account(w.at(start), w.at(end), OWN), tp, agent, kernel, unit)
        except SystemExit:
            return [l for l in out.getvalue().splitlines() if l.startswith('FAIL')][0]
    return 'ok'


class Accounting(unittest.TestCase):
    def test_every_event_ran(self):
        w = FakeWitness([event(1012), event(1033), event(1055, sport=6000)])
        a = w.account(w.at(1000), w.at(1100), OWN)['tcp_retransmit_skb']
        self.assertEqual((a['T'], a['R'], a['M'], a['S'], a['E'], a['S_own']), (3, 3, 0, 0, 2, (0, 0)))
        self.assertEqual(verdict(w, 1000, 1100, 'tcp_retransmit_skb', 9, 9, 'segments'), 'ok')
        self.assertIn('no skipped event', verdict(w, 1000, 1100, 'tcp_retransmit_skb', 8, 9, 'segments'))

    def test_a_skipped_event_made_up_for_by_the_next(self):
        lost = event(1012)
        w = FakeWitness([lost, event(1033)], skipped=[lost])
        a = w.account(w.at(1000), w.at(1100), OWN)['tcp_retransmit_skb']
        self.assertEqual((a['T'], a['R'], a['S'], a['S_own']), (2, 1, 1, (1, 1)))
        self.assertEqual(tw.possibly_last(a), [])  # the socket's next event carried its segments
        self.assertIn('no skipped event', verdict(w, 1000, 1100, 'tcp_retransmit_skb', 5, 6, 'segments'))

    def test_a_skipped_last_event(self):
        lost = event(1033)
        w = FakeWitness([event(1012), lost], skipped=[lost])
        a = w.account(w.at(1000), w.at(1100), OWN)['tcp_retransmit_skb']
        self.assertEqual([e.ts for e in tw.possibly_last(a)], [lost.ts])
        self.assertEqual(verdict(w, 1000, 1100, 'tcp_retransmit_skb', 5, 6, 'segments'), 'ok')
        self.assertIn('agent 7 > kernel 6', verdict(w, 1000, 1100, 'tcp_retransmit_skb', 7, 6, 'segments'))

    def test_another_sockets_skip_is_not_the_tests(self):
        other = event(1012, sport=6000)
        w = FakeWitness([other, event(1043)], skipped=[other])
        a = w.account(w.at(1000), w.at(1100), OWN)['tcp_retransmit_skb']
        self.assertEqual((a['S'], a['S_own']), (1, (0, 0)))
        self.assertIn('no skipped event', verdict(w, 1000, 1100, 'tcp_retransmit_skb', 5, 6, 'segments'))

    def test_synacks_one_per_event(self):
        lost = event(1012, tp='tcp_retransmit_synack')
        w = FakeWitness([lost, event(1043, tp='tcp_retransmit_synack')], skipped=[lost])
        self.assertEqual(verdict(w, 1000, 1100, 'tcp_retransmit_synack', 1, 2, 'events'), 'ok')
        self.assertIn('agent 2 + skipped (1, 1) != kernel 2',
                      verdict(w, 1000, 1100, 'tcp_retransmit_synack', 2, 2, 'events'))

    def test_an_interval_of_both_attributes_within_bounds(self):
        lost = event(1012, tp='tcp_retransmit_synack')
        w = FakeWitness([lost, event(1014, sport=6000, tp='tcp_retransmit_synack')], skipped=[lost])
        a = w.account(w.at(1000), w.at(1100), OWN)['tcp_retransmit_synack']
        self.assertEqual(a['S_own'], (0, 1))  # one of the two was skipped: which, the counts cannot say
        for agent in (0, 1):
            self.assertEqual(verdict(w, 1000, 1100, 'tcp_retransmit_synack', agent, 1, 'events'), 'ok')

    def test_a_read_while_the_socket_retransmits(self):
        w = FakeWitness([event(1012), event(1100.5)])
        self.assertIn('at a read', verdict(w, 1000, 1100, 'tcp_retransmit_skb', 1, 1, 'segments'))

    def test_an_event_at_a_sample_widens_nothing_but_the_boundary(self):
        # An event at the 1050 ms sample: that sample is no boundary, the interval around it is.
        w = FakeWitness([event(1050.05)])
        a = w.account(w.at(1000), w.at(1100), OWN)['tcp_retransmit_skb']
        self.assertEqual((a['T'], a['R'], a['S']), (1, 1, 0))


    def test_a_skipped_last_event_settled_at_a_close_that_ran(self):
        lost, end = event(1033), close(1040)
        w = FakeWitness([event(1012), lost, end], skipped=[lost], log=ran(event(1012), closes=[(end, lost.sk)]))
        self.assertIn('no skipped event', verdict(w, 1000, 1100, 'tcp_retransmit_skb', 5, 6, 'segments'))
        self.assertEqual(verdict(w, 1000, 1100, 'tcp_retransmit_skb', 6, 6, 'segments'), 'ok')

    def test_a_skipped_last_event_whose_close_ran_nothing(self):
        # The close in the same softirq as the skipped retransmit: no program ran for either.
        lost, end = event(1033), close(1033.05)
        w = FakeWitness([event(1012), lost, end], skipped=[lost], log=ran(event(1012)))
        self.assertEqual(verdict(w, 1000, 1100, 'tcp_retransmit_skb', 5, 6, 'segments'), 'ok')

    def test_a_freed_sockets_address_reused_is_another_socket(self):
        # The skipped FIN retransmit was its socket's last; the next connection's socket got the
        # same address (seen in a CI run of agent_in_container): it carries nothing of the first.
        first = event(1012)
        lost, end, reused = event(1033), close(1033.05), event(1060, dport=40001)
        w = FakeWitness([first, lost, end, reused], skipped=[lost], log=ran(first, reused))
        a = w.account(w.at(1000), w.at(1100), OWN)['tcp_retransmit_skb']
        self.assertEqual([e.ts for e in tw.possibly_last(a)], [lost.ts])
        self.assertEqual(verdict(w, 1000, 1100, 'tcp_retransmit_skb', 5, 6, 'segments'), 'ok')
        # The same connection retransmitting again on that socket would have carried it.
        again = event(1060)
        w = FakeWitness([first, lost, again], skipped=[lost], log=ran(first, again))
        self.assertIn('no skipped event', verdict(w, 1000, 1100, 'tcp_retransmit_skb', 5, 6, 'segments'))


def ran(*events, closes=()):
    """A witness log in which both bpf_trace_run witness programs ran for EVENTS, and w_close_btf
    for CLOSES ([(close event, socket)]) (complete)."""
    log = {p: {0: sorted((e.ts + 20000, e.sk) for e in events)} for p in tw.WITNESS_OF['tcp_retransmit_skb'][:2]}
    log[tw.CLOSE_WITNESS] = {0: sorted((c.ts + 20000, sk) for c, sk in closes)}
    return log, {}


class TimerLag(unittest.TestCase):
    """unrun_tail: how many of a socket's latest retransmits the agent's timer state may lag."""

    def test_the_latest_ran(self):
        a, b = event(1000), event(1400)
        self.assertEqual(tw.unrun_tail([a, b], OWN, ran(a, b)), [])

    def test_the_last_two_ran_nothing(self):
        a, b, c = event(1000), event(1200), event(1600)
        self.assertEqual(tw.unrun_tail([a, b, c], OWN, ran(a)), [b, c])

    def test_a_skip_before_the_latest_explains_nothing(self):
        a, b, c = event(1000), event(1200), event(1600)
        self.assertEqual(tw.unrun_tail([a, b, c], OWN, ran(a, c)), [])

    def test_other_sockets_and_one_program_are_not_the_test_s(self):
        a, other = event(1000), event(1300, sk='ffff9999', sport=6000)
        self.assertEqual(tw.unrun_tail([a, other], OWN, ran(a)), [])
        b = event(1500)
        one_ran = ({tw.WITNESS_OF['tcp_retransmit_skb'][0]: {0: [(b.ts, b.sk)]}}, {})
        self.assertEqual(tw.unrun_tail([a, b], OWN, one_ran), [])  # a program ran for it: not the kernel's skip

    def test_an_event_older_than_the_log_is_not_judged(self):
        a = event(1000)
        log, _ = ran()
        self.assertEqual(tw.unrun_tail([a], OWN, (log, {0: int(1500 * MS)})), [])


if __name__ == '__main__':
    unittest.main()
