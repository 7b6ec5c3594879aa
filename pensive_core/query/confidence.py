"""How confident an L2 answer is (it decides, with ``[router] l3_below``, whether L3 is asked)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..fusion import Fused

__all__ = ["confidence"]


def confidence(fused: Sequence[Fused], lists: Mapping[str, Sequence[tuple[str, float]]]) -> float:
    """A heuristic in [0, 1] from retriever agreement, dense similarity and the fused margin.

    Agreement is the share of retrievers that put the top passage in their own top 10; the dense
    similarity of the top passage is mapped from [0.2, 0.7] to [0, 1]; the margin is the top
    fused score's lead over the second, relative to the top.
    """
    if not fused:
        return 0.0
    top = fused[0]
    agree = sum(1 for name in lists if top.ranks.get(name, 10**9) <= 10) / max(1, len(lists))
    dense = dict(lists.get("dense", []))
    sim = float(np.clip((dense.get(top.id, 0.0) - 0.2) / 0.5, 0.0, 1.0)) if dense else agree
    margin = (top.score - fused[1].score) / top.score if len(fused) > 1 and top.score > 0 else 1.0
    value = float(np.clip(0.45 * agree + 0.4 * sim + 0.15 * margin, 0.0, 1.0))
    return round(value, 4) if math.isfinite(value) else 0.0  # a NaN score: no confidence
