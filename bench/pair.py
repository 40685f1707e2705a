"""Paired comparison of alternating rounds, shared by bench/cpu.py, net.py and disk.py.

Each round runs peakbench and the reference tool on the same case back to back, so the round's
own ratio cancels most of the machine's drift; the scripts report the median of those ratios
with a distribution-free confidence interval of the median.
"""

import math
import statistics


def median_ci(values, level=0.95):
    """Distribution-free confidence interval of the median: the order statistics x(k), x(n+1-k)
    with the largest k whose binomial coverage is at least `level` (no resampling, so the
    same data give the same interval). Fewer than 6 values cannot reach 95 %: min..max, with
    its coverage."""
    xs = sorted(values)
    n = len(xs)
    below = 0.0  # P(Binomial(n, 1/2) < k), for k = 1, 2, ...
    k, coverage = 1, 1 - 2 * 0.5 ** n
    for j in range(1, n // 2 + 1):
        below += math.comb(n, j - 1) * 0.5 ** n
        if 1 - 2 * below < level:
            break
        k, coverage = j, 1 - 2 * below
    return xs[k - 1], xs[n - k], coverage


def paired_text(ratios):
    lo, hi, _ = median_ci(ratios)
    return f"{statistics.median(ratios):5.2f} [{lo:4.2f}..{hi:<4.2f}]"


def ci_note(n):
    _, _, coverage = median_ci(list(range(n)))
    return (f"a distribution-free {coverage:.0%} confidence interval of the median of the rounds' "
            f"own ratios ({n} rounds; 6 or more reach 95 %)")
