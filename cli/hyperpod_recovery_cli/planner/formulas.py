"""The formulas, each as published (../shared/reference/goodput-models.md §2 holds the derivations).

Notation, every time in minutes unless named otherwise: M the job's mean time to failure, τ the compute
time between checkpoints, δ the blocking cost of one checkpoint, R the recovery time of one failure.
"""

from __future__ import annotations

import math

MINUTES_PER_DAY = 24 * 60
# The numeric search for the best interval stops when its bracket is this narrow (relative).
_SEARCH_TOLERANCE = 1e-9


# A job's mean time to failure is taken as at most this (about 1.9 million years): a rate so small
# (5e-324 is a valid float) that M overflows already gives an ETTR of 1 to double precision; and as
# at least this (60 ms), where a rate so large that M underflows already gives an ETTR of 0.
LONGEST_MTTF_MINUTES = 1e12
SHORTEST_MTTF_MINUTES = 1e-3


def job_mttf_minutes(nodes: int, per_node_day: float) -> float:
    """M = 1 / (N·r_f): independent nodes, Poisson failures (Meta, Kokolis et al. HPCA 2025)."""
    failures_per_day = nodes * per_node_day
    if failures_per_day <= MINUTES_PER_DAY / LONGEST_MTTF_MINUTES:
        return LONGEST_MTTF_MINUTES
    return max(SHORTEST_MTTF_MINUTES, MINUTES_PER_DAY / failures_per_day)


def daly_ettr(interval: float, cost: float, recovery: float, mttf: float) -> float:
    """Daly (2006), expected wall time T_w = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ for exponential failures
    with restart R and dump δ; ETTR = T_s / T_w. Valid when R and τ are not small against M."""
    # In logs: for τ or R of many M, e^{R/M} and e^{(τ+δ)/M} overflow while their ratio is only tiny.
    return math.exp(math.log(interval / mttf) - recovery / mttf - _log_expm1((interval + cost) / mttf))


def _log_expm1(x: float) -> float:
    """ln(e^x − 1) for x > 0, without overflow."""
    return x + math.log1p(-math.exp(-x)) if x > 30 else math.log(math.expm1(x))


def first_order_losses(interval: float, cost: float, recovery: float, mttf: float) -> tuple[float, float, float]:
    """(checkpoint δ/(τ+δ), rework (τ/2)/M, recovery R/M): the additive small-loss decomposition."""
    return cost / (interval + cost), interval / 2 / mttf, recovery / mttf


def first_order_ettr(interval: float, cost: float, recovery: float, mttf: float) -> float:
    """Meta's E[ETTR] ≈ (1 − (R + τ/2)/M) / (1 + δ/τ), the queue term dropped; not below 0."""
    return max(0.0, (1 - (recovery + interval / 2) / mttf) / (1 + cost / interval))


def young_interval(cost: float, mttf: float) -> float:
    """Young (1974): τ* = sqrt(2·δ·M)."""
    return math.sqrt(2 * cost * mttf)


def daly_interval(cost: float, mttf: float) -> float:
    """Daly (2006), the higher-order estimate:
    τ* = sqrt(2δM)·[1 + (1/3)·sqrt(δ/(2M)) + (1/9)·(δ/(2M))] − δ for δ < 2M, else τ* = M."""
    if cost >= 2 * mttf:
        return mttf
    ratio = cost / (2 * mttf)
    return math.sqrt(2 * cost * mttf) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - cost


def best_interval(cost: float, mttf: float) -> float:
    """The τ that maximizes Daly's ETTR, by golden-section search over log τ (the ratio is unimodal
    in τ; R only scales it, so it does not move the optimum)."""
    low, high = math.log(mttf * 1e-7), math.log(mttf * 20)
    golden = (math.sqrt(5) - 1) / 2

    def value(log_interval: float) -> float:
        return daly_ettr(math.exp(log_interval), cost, 0.0, mttf)

    a, b = high - golden * (high - low), low + golden * (high - low)
    fa, fb = value(a), value(b)
    while high - low > _SEARCH_TOLERANCE:
        if fa < fb:
            low, a, fa = a, b, fb
            b = low + golden * (high - low)
            fb = value(b)
        else:
            high, b, fb = b, a, fa
            a = high - golden * (high - low)
            fa = value(a)
    return math.exp((low + high) / 2)


# Above this mean the Poisson tail is taken from its normal approximation (continuity-corrected):
# summing terms would cost O(sqrt(mean)) each, and the error is far below one node.
LARGE_MEAN = 1e5


def _poisson_terms_from(mean: float) -> int:
    """Where the terms of Poisson(mean) start to matter: below mean − 12·sqrt(mean) they sum to under 1e-30."""
    return max(0, int(mean - 12 * math.sqrt(mean)) - 1)


def _poisson_pmf(i: int, mean: float) -> float:
    """P(X = i), in log space so that neither e^-mean nor mean^i overflows for a large mean."""
    return math.exp(-mean + i * math.log(mean) - math.lgamma(i + 1))


def poisson_cdf(k: int, mean: float) -> float:
    """P(X ≤ k) for X ~ Poisson(mean)."""
    if k < 0:
        return 0.0
    if mean <= 0:
        return 1.0
    if mean > LARGE_MEAN:
        return 0.5 * math.erfc(-(k + 0.5 - mean) / math.sqrt(2 * mean))
    return min(1.0, math.fsum(_poisson_pmf(i, mean) for i in range(_poisson_terms_from(mean), k + 1)))


def poisson_quantile(mean: float, probability: float) -> int:
    """The smallest k with P(X ≤ k) ≥ probability, X ~ Poisson(mean)."""
    if mean <= 0:
        return 0
    if mean > LARGE_MEAN:
        low, high = _poisson_terms_from(mean), int(mean + 13 * math.sqrt(mean)) + 1
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if poisson_cdf(middle, mean) >= probability else (middle + 1, high)
        return low
    k, total = _poisson_terms_from(mean), 0.0
    while True:
        total += _poisson_pmf(k, mean)
        if total >= probability:
            return k
        k += 1
