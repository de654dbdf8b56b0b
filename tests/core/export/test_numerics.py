"""The comparison of onnxruntime's outputs with eager's: tolerances per dtype, errors
reported, NaN and inf where both sides agree, shapes, integers exact."""

from __future__ import annotations

import math

import torch

from exportlens.core.export.lowering.numerics import TOLERANCES, compare


def test_float32_within_tolerance_matches_and_reports_the_error() -> None:
    eager = torch.tensor([1.0, 2.0, -4.0])
    ort = eager + torch.tensor([0.0, 1e-5, -2e-5])
    found = compare("y", ort, eager)
    assert found.ok and found.dtype == "float32" and (found.atol, found.rtol) == TOLERANCES["float32"]
    assert math.isclose(found.max_abs, 2e-5, rel_tol=1e-2) and math.isclose(found.max_rel, 5e-6, rel_tol=1e-2)  # float32 steps


def test_beyond_tolerance_is_a_mismatch() -> None:
    found = compare("y", torch.full((2, 3), 2.5), torch.full((2, 3), 2.0))
    assert not found.ok and found.max_abs == 0.5 and found.max_rel == 0.25


def test_float16_gets_a_wider_tolerance_than_float64() -> None:
    eager = torch.tensor([1.0], dtype=torch.float16)
    assert compare("y", eager + 0.001, eager).ok
    eager64 = torch.tensor([1.0], dtype=torch.float64)
    assert not compare("y", eager64 + 0.001, eager64).ok


def test_integers_must_be_equal() -> None:
    assert compare("i", torch.tensor([1, 2]), torch.tensor([1, 2])).ok
    assert not compare("i", torch.tensor([1, 3]), torch.tensor([1, 2])).ok


def test_nan_and_inf_agree_only_when_both_sides_have_them() -> None:
    eager = torch.tensor([float("nan"), float("inf"), 1.0])
    assert compare("y", eager.clone(), eager).ok
    found = compare("y", torch.tensor([0.0, float("inf"), 1.0]), eager)
    assert not found.ok and found.max_abs == float("inf")


def test_a_shape_difference_is_a_mismatch_without_numbers() -> None:
    found = compare("y", torch.zeros(2, 3), torch.zeros(3, 2))
    assert not found.ok and not found.shape_ok
