"""Small local text perturbations: character swaps and deletions, word drops, casing.

TextAttack offers these and much more, but it pulls a very large dependency tree (flair, gensim,
HF datasets) and some of its recipes download resources at run time, which this project may not
do; these few functions need nothing but a seeded numpy generator. Keyboard typos come from
tab_err's Typo (see corruptions.py). Each function changes about one unit in RATE of its text,
at least one, so a perturbed cell always differs from the clean one when it can.
"""

from __future__ import annotations

import numpy as np

RATE = 10  # one character (or word) in RATE is touched


def _count(length: int) -> int:
    return max(1, length // RATE)


def swap_chars(value: str, rng: np.random.Generator) -> str:
    """Adjacent characters swapped at a few places."""
    chars = list(value)
    if len(chars) < 2:
        return value
    for position in rng.choice(len(chars) - 1, size=min(_count(len(chars)), len(chars) - 1), replace=False):
        chars[position], chars[position + 1] = chars[position + 1], chars[position]
    return "".join(chars)


def delete_chars(value: str, rng: np.random.Generator) -> str:
    """A few characters deleted."""
    if len(value) < 2:
        return value
    dropped = set(rng.choice(len(value), size=_count(len(value)), replace=False).tolist())
    return "".join(ch for i, ch in enumerate(value) if i not in dropped)


def drop_words(value: str, rng: np.random.Generator) -> str:
    """A few words dropped (one word is always kept)."""
    words = value.split()
    if len(words) < 2:
        return value
    count = min(_count(len(words)), len(words) - 1)
    dropped = set(rng.choice(len(words), size=count, replace=False).tolist())
    return " ".join(word for i, word in enumerate(words) if i not in dropped)


def change_case(value: str, rng: np.random.Generator) -> str:
    """The whole text upper- or lower-cased, or every word's case flipped at random."""
    choice = int(rng.integers(3))
    if choice == 0 and value != value.upper():
        return value.upper()
    if choice == 1 and value != value.lower():
        return value.lower()
    return " ".join(word.swapcase() if rng.random() < 0.5 else word for word in value.split(" "))
