"""record.Record builds, from NamedTuple class syntax, what typing.NamedTuple builds, without
importing typing: the same fields, defaults, methods, docstring, equality, pickling and errors.
Each case is built both ways and compared."""

from __future__ import annotations

import pickle
import subprocess
import sys
from typing import NamedTuple

import pytest

from tmuxjail.record import Record


class Theirs(NamedTuple):
    """A doc."""

    a: str
    b: tuple[str, ...] = ()
    c: int = 3

    def twice(self) -> int:
        return self.c * 2

    @property
    def first(self) -> str:
        return self.a[:1]

    @classmethod
    def make(cls, a: str) -> Theirs:
        return cls(a, ("x",))


class Ours(Record):
    """A doc."""

    a: str
    b: tuple[str, ...] = ()
    c: int = 3

    def twice(self) -> int:
        return self.c * 2

    @property
    def first(self) -> str:
        return self.a[:1]

    @classmethod
    def make(cls, a: str) -> Ours:
        return cls(a, ("x",))


def test_the_same_class_as_typing_builds():
    for cls in (Theirs, Ours):
        x = cls("abc")
        assert isinstance(x, tuple) and cls.__bases__ == (tuple,)
        assert cls._fields == ("a", "b", "c") and cls._field_defaults == {"b": (), "c": 3}
        assert tuple(x) == ("abc", (), 3) and x == ("abc", (), 3)
        assert x._replace(c=4).twice() == 8 and x.first == "a" and cls.make("q").b == ("x",)
        assert x._asdict() == {"a": "abc", "b": (), "c": 3} and cls._make(["z", (), 1]).a == "z"
        assert repr(x) == f"{cls.__name__}(a='abc', b=(), c=3)"
        assert cls.__doc__ == "A doc." and cls.__module__ == __name__ and cls.__qualname__ == cls.__name__
        assert list(cls.__annotations__) == ["a", "b", "c"]
        assert pickle.loads(pickle.dumps(x)) == x
        with pytest.raises(TypeError):
            cls()  # a has no default
        with pytest.raises(AttributeError):
            x.a = "no"  # type: ignore[misc]


@pytest.mark.parametrize("base", ["NamedTuple", "Record"])
def test_the_same_errors_in_a_class_body(base):
    ns = {"NamedTuple": NamedTuple, "Record": Record, "__name__": "m"}
    with pytest.raises(TypeError, match=r"Non-default namedtuple field b cannot follow default field a$"):
        exec(f"class Bad({base}):\n    a: int = 1\n    b: int\n", dict(ns))
    with pytest.raises(AttributeError, match="Cannot overwrite NamedTuple attribute _replace"):
        exec(f"class Bad({base}):\n    a: int\n    def _replace(self): pass\n", dict(ns))


def test_a_record_inherits_from_record_alone():
    with pytest.raises(TypeError, match="inherits from Record alone"):
        exec("class Bad(Record, int):\n    a: int\n", {"Record": Record, "__name__": "m"})


def test_importing_record_and_the_warm_path_records_loads_no_typing():
    code = ("import sys; import tmuxjail.record, tmuxjail.effective, tmuxjail.store, tmuxjail.request, "
            "tmuxjail.jail, tmuxjail.warm, tmuxjail.tmux; print('typing' in sys.modules)")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_network_is_still_the_literal_pydantic_validates_with():
    from typing import Literal

    from tmuxjail import effective

    assert effective.Network == Literal["host", "none", "proxy"]
    with pytest.raises(AttributeError):
        effective.Nope  # noqa: B018
