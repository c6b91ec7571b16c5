"""Confidence intervals of the mean of paired differences (Student's t), for the A/B benchmarks.
No scipy on the machines these run on, so the t quantile is computed here: the t CDF through the
regularized incomplete beta function (continued fraction, Numerical Recipes' betacf), inverted
by bisection; checked against published table values in tests/bench/paired_interval_test.py."""
import math
import random
import statistics


def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a, b, x):
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def t_cdf(t, df):
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t >= 0 else tail


def t_quantile(p, df):
    """Student t's P quantile, 0.5 < P < 1."""
    lo, hi = 0.0, 1e4
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def t_interval(d, level=0.95):
    """(mean, half-width) of the LEVEL t interval of the mean of D (at least 2 values)."""
    n = len(d)
    return statistics.mean(d), t_quantile(0.5 + level / 2, n - 1) * statistics.stdev(d) / math.sqrt(n)


def crossover_interval(d_ab, d_ba, level=0.95):
    """(effect, half-width) of a two-period crossover: D_AB are the rounds measured A then B, D_BA
    those measured B then A, each value B/A - 1 (or B - A). Whatever the second period adds is in
    both groups with opposite signs, so the effect is the mean of the two groups' means, and its
    interval uses the pooled variance within the groups (df n_ab + n_ba - 2): a period effect
    neither biases it nor widens it (Jones & Kenward, Design and Analysis of Cross-Over Trials,
    section 2.3). Each group needs at least 2 rounds."""
    n1, n2 = len(d_ab), len(d_ba)
    pooled = ((n1 - 1) * statistics.variance(d_ab) + (n2 - 1) * statistics.variance(d_ba)) / (n1 + n2 - 2)
    effect = (statistics.mean(d_ab) + statistics.mean(d_ba)) / 2
    return effect, t_quantile(0.5 + level / 2, n1 + n2 - 2) * 0.5 * math.sqrt(pooled * (1 / n1 + 1 / n2))


def bootstrap_interval(d, level=0.95, resamples=10000, seed=26):
    """Percentile bootstrap interval of the mean of D: a check that does not assume D normal."""
    rng = random.Random(seed)
    means = sorted(statistics.mean(rng.choices(d, k=len(d))) for _ in range(resamples))
    cut = int(resamples * (1 - level) / 2)
    return means[cut - 1], means[resamples - cut - 1]
