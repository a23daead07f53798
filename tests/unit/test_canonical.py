"""Canonical JSON (lonca/canonical.py): keys sorted, no whitespace, UTF-8 as is, and no float
anywhere, however it prints; text that only looks like a float is a string like any other."""
import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from lonca.canonical import canonical, canonical_text


def reference(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("value", [
    1.5, -0.0, 1e16, 2.5e-7, math.inf, -math.inf, math.nan, [0, 1.0], {"a": {"b": [1, {"c": 3.25}]}},
    {"time_ms": 1, "x": [True, None, 0.5]}, {"s": "1.5", "n": 1e300},
])
def test_floats_are_refused_wherever_they_are(value):
    with pytest.raises(ValueError, match="floats"):
        canonical(value)


@pytest.mark.parametrize("value", [
    {"a": "1.5", "b": ":1e5", "c": "[NaN,Infinity", "d": ",-2.0"}, ["x:1.0", "[1e3]"], "1.5", {"1.5": 1},
    {"k": 10**15, "neg": -3, "nested": [[-1, 2], {"e": "E"}]},
])
def test_what_only_looks_like_a_float_is_taken(value):
    assert canonical_text(value) == reference(value) and canonical(value) == reference(value).encode()


_KEYS = st.text(st.sampled_from(list("ab:,[]1.eE-\"\\é")), max_size=5)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _KEYS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(value=_VALUES, at=st.floats(allow_nan=True, allow_infinity=True), where=st.integers(0, 2))
def test_canonical_is_the_sorted_compact_json_and_refuses_any_float(value, at, where):
    assert canonical_text(value) == reference(value)
    spiked = [value, at] if where == 0 else {"v": value, "f": at} if where == 1 else [[{"x": [at]}], value]
    with pytest.raises(ValueError, match="floats"):
        canonical(spiked)
