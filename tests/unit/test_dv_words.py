"""The 64-row words that carry deletion vectors to Spark's scan: they say exactly the rows."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from deltatx.spark.dv_filter import deleted_words, word_arrays

_files = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=50),
        st.sets(st.integers(min_value=0, max_value=5_000), max_size=200),
    ),
    max_size=6,
    unique_by=lambda f: f[0],
)


@given(_files)
def test_words_say_exactly_the_deleted_rows(files: list[tuple[int, set[int]]]) -> None:
    stride, keys, words = deleted_words(
        [(index, np.array(sorted(rows), dtype=np.int64)) for index, rows in files]
    )
    assert len(set(keys.tolist())) == len(keys)
    assert all(int(w) != 0 for w in words)
    by_key = dict(zip(keys.tolist(), words.tolist(), strict=True))
    for index, rows in files:
        # Every row up to the stride, and a few past it (which no vector may claim).
        for row in range(0, stride * 64 + 128, 7):
            word = row >> 6
            key = index * stride + word if word < stride else None
            bits = by_key.get(key, 0) if key is not None else 0
            assert bool(bits >> (row & 63) & 1) == (row in rows), (index, row)
        for row in rows:
            assert by_key[index * stride + (row >> 6)] >> (row & 63) & 1


@given(st.sets(st.integers(min_value=0, max_value=20_000), max_size=300))
def test_word_arrays_say_exactly_the_deleted_rows(rows: set[int]) -> None:
    words = word_arrays(np.array(sorted(rows), dtype=np.int64)).tolist()
    assert len(words) == (max(rows) // 64 + 1 if rows else 0)
    for row in range(0, 20_100):
        word = row >> 6
        bits = words[word] if word < len(words) else 0
        assert bool(bits >> (row & 63) & 1) == (row in rows), row
