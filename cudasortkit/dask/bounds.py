"""Where an output boundary falls: the (key, chunk, position) bounds the
splitters (splitters.py) compute and the chunk tasks (chunks.py) locate."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: chunk index of a bound that lies after every element (no upper sample).
END = -1


class Bounds(NamedTuple):
    """One element per boundary: (key, chunk, position); chunk END = past the end."""
    keys: np.ndarray
    chunk: np.ndarray
    pos: np.ndarray


def sample_positions(n: int, count: int) -> np.ndarray:
    """Regular positions in a sorted chunk of n keys; the first is 0."""
    s = min(n, count)
    return (np.arange(s, dtype=np.int64) * n) // max(s, 1)
