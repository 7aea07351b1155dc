"""NKIObject classes built as the NKI 0.7 compiler builds them (nki-language-guide "Class Support"): every class is
a data class, with or without ``@dataclass``; fields are annotated names and plain class attributes, defaults None."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from nki_kernels.sim.nki07 import language as nl
from nki_kernels.sim.nki07.language import nkiobject_fields


@dataclass
class Unannotated(nl.NKIObject):
    a = None
    b = 3

    def total(self):
        return self.a + self.b


class Mixed(nl.NKIObject):  # no @dataclass: the compiler's __init__ all the same
    x: int
    z = 5
    y: bool = True


@dataclass(frozen=True)
class Frozen(nl.NKIObject):
    p: int = 0
    q: list = field(default_factory=list)


class OwnInit(nl.NKIObject):
    x: int = 1

    def __init__(self, x):
        self.x = 10 * x


class PostInit(nl.NKIObject):
    x: int = 0

    def __post_init__(self):
        self.y = self.x + 1


def test_plain_class_attributes_are_fields_by_keyword_and_position():
    assert vars(Unannotated(a=1)) == {"a": 1, "b": 3}
    assert Unannotated(1, 2).total() == 3


def test_field_order_is_the_class_body_order_and_missing_defaults_are_none():
    assert [n for n, _ in nkiobject_fields(Mixed)] == ["x", "z", "y"]
    assert vars(Mixed(1, 2)) == {"x": 1, "z": 2, "y": True}
    assert vars(Mixed()) == {"x": None, "z": 5, "y": True}


def test_frozen_dataclass_constructs_and_factories_run_per_instance():
    a, b = Frozen(p=3), Frozen()
    assert (a.p, a.q, b.p) == (3, [], 0) and a.q is not b.q


def test_a_class_with_its_own_init_keeps_it_and_post_init_runs():
    assert OwnInit(2).x == 20
    assert vars(PostInit(4)) == {"x": 4, "y": 5}


@pytest.mark.parametrize(
    ("args", "kwargs", "says"),
    [
        ((), {"c": 1}, "has no field 'c'; its fields: a, b"),
        ((1, 2, 3), {}, "takes 2 field values"),
        ((1,), {"a": 2}, "both by position and by keyword"),
    ],
)
def test_bad_construction_names_the_fields(args, kwargs, says):
    with pytest.raises(TypeError, match=says):
        Unannotated(*args, **kwargs)
