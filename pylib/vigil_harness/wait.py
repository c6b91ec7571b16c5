"""Polling for a condition with a deadline."""
import time

from vigil_harness.fail import fail


def wait_for(what, predicate, timeout, step=0.5):
    """PREDICATE's first true value within TIMEOUT seconds (polled every STEP); fails saying WHAT
    did not happen."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(step)
    fail("%s: not within %d s" % (what, timeout))
