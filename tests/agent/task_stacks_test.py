#!/usr/bin/env python3
"""task_stacks, what a test prints of an agent that overran its stop: read from the kernel for a
process whose wait is known (sleep(1) in clock_nanosleep), every thread named with its stack."""
import subprocess
import unittest

from vigil_harness.agent import task_stacks
from vigil_harness.wait import wait_for


class TaskStacks(unittest.TestCase):
    def test_a_sleeping_process_is_seen_in_its_sleep(self):
        proc = subprocess.Popen(['sleep', '30'])
        try:
            def in_its_sleep():  # the kernel's view once the process sleeps: read until wchan says so
                text = task_stacks(proc.pid)
                return text if 'wchan=hrtimer_nanosleep' in text else None
            text = wait_for('sleep in its nanosleep', in_its_sleep, 5, 0.05)
            self.assertIn('%d sleep wchan=hrtimer_nanosleep' % proc.pid, text)
            self.assertIn('sys_clock_nanosleep', text)  # the stack, under its arch's prefix
        finally:
            proc.kill()
            proc.wait()


if __name__ == '__main__':
    unittest.main()
