"""VigilCollectiveRankStuck as the stuck-rank tests (NCCL ranks, the worker's tensor-parallel
ranks) see it through vigil_harness.stack: the windows they shorten, the scrape of the agent, how
long a page may take, and the pages themselves. A rank is anything with .rank and .pid. Only the
test's own COMMUNICATOR's alerts count: the agent sees every process on the machine, and another
communicator there may be stuck."""
import time

from vigil_harness.fail import fail
from vigil_harness.wait import wait_for

ALERT = 'VigilCollectiveRankStuck'
PAGE = '/page'
NODE = 'e2e-node'
WAIT_S, FOR_S = 5, 5
# Shortened for the tests; the expressions are the shipped ones.
RULE_OVERRIDES = {'rankStuckWaitSeconds': WAIT_S, 'rankStuckFor': '%ds' % FOR_S, 'rankGoneWindow': '2m'}
# Prometheus scrapes and evaluates every second (stack.py); Alertmanager's group_wait is 1 s.
SCRAPE_S, GROUP_WAIT_S = 1, 1


def agent_scrape(agent):
    """Prometheus' scrape config for AGENT, its series labelled as one node of one cluster."""
    return [{'job_name': 'vigil-agent',
             'static_configs': [{'targets': ['127.0.0.1:%d' % agent.port],
                                 'labels': {'cluster': 'e2e', 'node': NODE}}]}]


def page_budget(slack_s):
    """Seconds from a rank's stop to its page: the wait threshold and `for`, two scrapes and two
    evaluations, Alertmanager's group_wait, and SLACK_S."""
    return WAIT_S + FOR_S + 2 * SCRAPE_S + 2 * SCRAPE_S + GROUP_WAIT_S + slack_s


def page_alerts(stack, status, since, communicator):
    return [a for t, a in stack.receiver.alerts(PAGE, ALERT, status)
            if t >= since and a['labels'].get('communicator') == communicator]


def check_quiet(stack, while_what, communicator):
    """No ALERT for COMMUNICATOR in Prometheus now (firing or pending), WHILE_WHAT."""
    active = stack.query('ALERTS{alertname="%s", communicator="%s"}' % (ALERT, communicator))
    if active:
        fail("%s %s: %s" % (ALERT, while_what, active))


def wait_page(stack, since, rank, state, budget, communicator):
    """The first page for ALERT in COMMUNICATOR after SINCE; it must name RANK in STATE, and no
    other rank."""
    got = wait_for('%s paging for rank %d (%s)' % (ALERT, rank.rank, state),
                   lambda: page_alerts(stack, 'firing', since, communicator), budget + 30)
    took = time.time() - since
    names = sorted({(a['labels'].get('rank'), a['labels'].get('state'), a['labels'].get('pid')) for a in got})
    print("paged after %.1f s (budget %.1f s): %s" % (took, budget, names))
    if names != [(str(rank.rank), state, str(rank.pid))]:
        fail("the page names %s, expected rank %d (pid %d) %s only" % (names, rank.rank, rank.pid, state))
    if took > budget:
        fail("paged after %.1f s, more than %.1f s" % (took, budget))
    return got[0]


def check_waiting(alert, ranks, stuck):
    """ALERT's description lists every rank of RANKS but STUCK as waiting, and STUCK not."""
    desc = alert['annotations']['description']
    print("description: " + desc)
    for r in ranks:
        named = 'rank %d on %s' % (r.rank, NODE) in desc
        if named != (r is not stuck):
            fail("description %s rank %d as waiting: %s" % ('lists' if named else 'does not list', r.rank, desc))


def wait_resolved(stack, since, communicator):
    """Seconds from SINCE (the stopped rank's SIGCONT) to the first resolved notification of ALERT
    in COMMUNICATOR after it."""
    wait_for('%s resolved after SIGCONT' % ALERT, lambda: page_alerts(stack, 'resolved', since, communicator), 30)
    took = time.time() - since
    print("resolved %.1f s after SIGCONT" % took)
    return took
