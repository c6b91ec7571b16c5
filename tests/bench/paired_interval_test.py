#!/usr/bin/env python3
"""bench/paired_interval.py against published values: Student t quantiles from the standard table
(e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2), the paired interval of Student's sleep data as R's
t.test(extra ~ group, data = sleep, paired = TRUE) reports it (95 % CI -2.4598858 -0.7001142),
and the crossover interval, which is half the pooled two-sample interval of the AB group against
the BA group negated: R's t.test(extra ~ group, data = sleep, var.equal = TRUE) gives
-3.363874 0.203874 for group 1 against group 2."""
import sys

from paired_interval import crossover_interval, t_interval, t_quantile

# (p, df, quantile): upper critical values of the t distribution, table to 3 decimals.
TABLE = [(0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 3, 3.182), (0.975, 5, 2.571), (0.975, 9, 2.262),
         (0.975, 10, 2.228), (0.975, 20, 2.086), (0.975, 30, 2.042), (0.975, 60, 2.000), (0.975, 100, 1.984),
         (0.95, 1, 6.314), (0.95, 10, 1.812), (0.995, 5, 4.032), (0.995, 30, 2.750)]

# Cushny and Peebles' hours of extra sleep under two drugs, the same 10 patients.
GROUP1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
GROUP2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def main():
    bad = []
    for p, df, want in TABLE:
        got = t_quantile(p, df)
        if abs(got - want) > 0.0005:
            bad.append('t_quantile(%g, %d) = %.4f, table %.3f' % (p, df, got, want))
    mean, half = t_interval([a - b for a, b in zip(GROUP1, GROUP2)])
    if abs(mean - half - -2.4598858) > 1e-6 or abs(mean + half - -0.7001142) > 1e-6:
        bad.append('sleep data interval [%.7f, %.7f], R says [-2.4598858, -0.7001142]' % (mean - half, mean + half))
    effect, half = crossover_interval(GROUP1, [-x for x in GROUP2])
    if abs(2 * (effect - half) - -3.363874) > 1e-5 or abs(2 * (effect + half) - 0.203874) > 1e-5:
        bad.append('crossover interval x 2 [%.6f, %.6f], R says [-3.363874, 0.203874]'
                   % (2 * (effect - half), 2 * (effect + half)))
    for line in bad:
        print('FAIL: ' + line)
    if not bad:
        print('ok: %d table quantiles, the sleep data paired and crossover intervals' % len(TABLE))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
