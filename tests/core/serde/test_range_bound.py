"""``range_bound``: the one reading of a symbol's range ends, for the signature and the bytes.

torch writes ``int_oo`` for an open end (it claims ``is_finite``, so it must be
compared explicitly) and, rarely, a fractional end after a division; torch's own
serializer narrows those to the integers inside the range. Both readers of ranges
used to round differently; this table pins the one rule.
"""

from __future__ import annotations

from typing import Any

import pytest
import sympy
from torch.utils._sympy.numbers import int_oo

from exportlens.core.serde.encode import range_bound

HALF = sympy.Rational(5, 2)


@pytest.mark.parametrize(
    ("value", "lower", "expected"),
    [
        (int_oo, False, None),
        (-int_oo, True, None),
        (sympy.oo, False, None),
        (-sympy.oo, True, None),
        (None, True, None),
        (sympy.Integer(7), False, 7),
        (sympy.Integer(-3), True, -3),
        (4, True, 4),
        (sympy.true, False, 1),
        (sympy.false, True, 0),
        (HALF, True, 3),  # a fractional lower end rounds up ...
        (HALF, False, 2),  # ... an upper end down: the integers inside the range
        (-HALF, True, -2),
        (-HALF, False, -3),
        (sympy.Symbol("s0") + 1, True, None),  # a bound with free symbols is unknown
    ],
)
def test_range_bound(value: Any, lower: bool, expected: int | None) -> None:
    assert range_bound(value, lower=lower) == expected
