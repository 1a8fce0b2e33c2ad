#!/usr/bin/env python3
"""Coefficients of the hand-written kernel's 2cos(πδ) and 2sin(πδ) polynomials (src/kernel/fast.rs,
TWO_COS_PI_Q64/Q32, TWO_SIN_PI_P64/P32).

2cos(πδ) = 2 + t·Q(t) with t = δ², |δ| ≤ ½, Q of degree 6 (f64) or 3 (f32): the minimax Q for the
absolute error of t·Q(t) on t ∈ [0, ¼]; 2sin(πδ) = δ·P(t), P of degree 7 (f64) or 4 (f32): the
minimax P for the absolute error of δ·P(t) (Remez exchange in 50-digit arithmetic, mpmath). Prints
the coefficients (constant term first) and the error bounds; the Rust tests
`two_cos_pi_is_within_its_bound` and `two_sin_pi_is_within_its_bound` check the kernel's evaluation
against f64 cos and sin.

Usage: python3 scripts/fit_two_cos_pi.py   (needs mpmath; not run by the tests)
"""
import mpmath as mp

mp.mp.dps = 50
T = mp.mpf(1) / 4


def q_true(t):
    """(2cos(π√t) − 2)/t, its limit −π² at 0."""
    if t == 0:
        return -mp.pi ** 2
    return (2 * mp.cos(mp.pi * mp.sqrt(t)) - 2) / t


def p_true(t):
    """2sin(π√t)/√t, its limit 2π at 0."""
    if t == 0:
        return 2 * mp.pi
    r = mp.sqrt(t)
    return 2 * mp.sin(mp.pi * r) / r


def remez(deg, f=q_true, w=lambda t: t, rounds=15, grid=4000):
    """The minimax polynomial of degree `deg` for the weighted error w(t)·(P(t) − f(t)) on [0, ¼]."""
    n = deg + 1
    ref = [T / 2 - T / 2 * mp.cos(mp.pi * k / n) for k in range(n + 1)]
    ts = [T * mp.mpf(i) / grid for i in range(grid + 1)]
    for _ in range(rounds):
        # w(t_i)·(P(t_i) − f(t_i)) = (−1)^i E on the reference points
        a = mp.matrix([[w(t) * t ** j for j in range(n)] + [(-1) ** i] for i, t in enumerate(ref)])
        sol = mp.lu_solve(a, mp.matrix([w(t) * f(t) for t in ref]))
        c = [sol[j] for j in range(n)]
        err = [w(t) * (sum(c[j] * t ** j for j in range(n)) - f(t)) for t in ts]
        # the largest error of each sign run: the next reference
        runs = []
        for i in range(len(ts)):
            local = i in (0, len(ts) - 1) or (abs(err[i]) >= abs(err[i - 1]) and abs(err[i]) >= abs(err[i + 1]))
            if not local:
                continue
            if runs and mp.sign(err[i]) == mp.sign(err[runs[-1]]):
                if abs(err[i]) > abs(err[runs[-1]]):
                    runs[-1] = i
            else:
                runs.append(i)
        if len(runs) >= n + 1:
            best = max(range(len(runs) - n), key=lambda s: min(abs(err[runs[s + k]]) for k in range(n + 1)))
            ref = [ts[runs[best + k]] for k in range(n + 1)]
    return c, max(abs(e) for e in err)


for deg, name, f, w in (
    (6, "TWO_COS_PI_Q64", q_true, lambda t: t),
    (3, "TWO_COS_PI_Q32", q_true, lambda t: t),
    (7, "TWO_SIN_PI_P64", p_true, mp.sqrt),
    (4, "TWO_SIN_PI_P32", p_true, mp.sqrt),
):
    c, e = remez(deg, f, w)
    print(f"{name}: max |error| {mp.nstr(e, 3)}")
    print("    [" + ", ".join(repr(float(x)) for x in c) + "]")
