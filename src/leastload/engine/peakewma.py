"""PEAKEWMA's latency estimate in integer arithmetic (the reference's twin of
csrc/ll_peakewma.h). Not the vendor's method: after Finagle's and Linkerd's
peak-sensitive moving average.

A service's estimate is a cost in microseconds and the clock reading of its last
sample. Between samples it decays towards zero, E(t) = cost * w(t - stamp),
with w(d) = exp(-d / decay); a sample above E(t) replaces it (the peak), a
sample at or below it is blended in: cost' = cost * w + rtt * (1 - w).

w is computed exactly, the same on every platform: d in whole microseconds
times 94548 / decay_us is d / decay in units of ln(2) / 65536 (94548 is
round(65536 / ln 2)); its integer part k halves the weight k times, and the
16 bits of its fraction multiply it by 2 ** -(2 ** j / 65536) for each set bit
j (POW2_FRACTION, rounded to 32 bits). Weights are 32-bit fixed point.
"""
import math
from typing import Optional

ONE = 1 << 32  # w = 1 in 32-bit fixed point
LOG2E_Q16 = 94548  # round(65536 / ln 2)
DECAY_LIMIT = 23  # at 23 decay times w is below 2 ** -32: zero
# round(2 ** 32 * 2 ** -(2 ** j / 65536)) for j = 0 .. 15
POW2_FRACTION = (
    4294921870, 4294876445, 4294785595, 4294603903, 4294240540, 4293513907, 4292061010, 4289156690,
    4283353945, 4271771996, 4248701965, 4202935003, 4112874773, 3938502376, 3611622603, 3037000500,
)
# N of a service with open transactions and no estimate: above every E * (active + 1)
PENALTY = 2**64 - 2**32
DEFAULT_DECAY = 10.0  # seconds (Finagle's and Linkerd's default)


def decay_q32(elapsed: float, decay_us: int) -> int:
    """w(elapsed seconds) in 32-bit fixed point; no time (or the clock went back): 1."""
    if not elapsed > 0.0:
        return ONE
    d_us = math.floor(elapsed * 1e6)
    if d_us >= DECAY_LIMIT * decay_us:
        return 0
    steps = d_us * LOG2E_Q16 // decay_us
    w = ONE
    for j in range(16):
        if steps >> j & 1:
            w = w * POW2_FRACTION[j] >> 32
    return w >> (steps >> 16)


class Estimate:
    """One service's estimate: its cost (us) and the time of its last sample."""

    __slots__ = ("cost_us", "stamp", "known")

    def __init__(self) -> None:
        self.cost_us = 0
        self.stamp = 0.0
        self.known = False  # no sample yet: E = 0

    def at(self, now: float, decay_us: int) -> int:
        """E(now) in microseconds."""
        return self.cost_us * decay_q32(now - self.stamp, decay_us) >> 32 if self.known else 0

    def observe(self, rtt_us: int, now: float, decay_us: int) -> None:
        """A response time sample taken at `now`."""
        w = decay_q32(now - self.stamp, decay_us)
        if not self.known or rtt_us > self.cost_us * w >> 32:
            self.cost_us = rtt_us  # the peak: taken at once
        else:
            self.cost_us = (self.cost_us * w + rtt_us * (ONE - w)) >> 32
        self.stamp = now
        self.known = True

    def seconds(self, now: float, decay_us: int) -> Optional[float]:
        """E(now) in seconds for info(); None before the first sample."""
        return self.at(now, decay_us) / 1e6 if self.known else None


def load(estimate: int, active: int) -> int:
    """N = E * (active + 1); with no estimate, 0 when idle, else above every estimate's N."""
    if estimate > 0:
        return estimate * (active + 1)
    return PENALTY + active if active else 0
