"""`Record`: typing.NamedTuple for the type checker; at run time the same class syntax made into a
collections.namedtuple without importing typing.

Why: a warm start builds 19 NamedTuple classes before its pane exists. typing.NamedTuple compiles
each field's annotation (a string, under `from __future__ import annotations`) into a ForwardRef
it never uses again: 3.6 ms of a start, plus 2.8 ms for importing typing itself
(docs/performance.md). The annotations stay as they are written, for mypy and for readers;
run time gets the same fields, defaults, methods, docstring and errors, from the standard
library's own namedtuple. Stdlib only.

    class Row(Record):
        id: str
        status: str = "starting"
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not imported: see above
if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:
    from collections import namedtuple

    # What typing.NamedTuple refuses to let a class body overwrite, and what it does not copy.
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults",
                             "_make", "_replace", "_asdict", "_source"})
    _SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})

    class _Meta(type):
        def __new__(mcls, name, bases, ns):
            if ns.get("__module__") == __name__ and name == "Record":
                return super().__new__(mcls, name, bases, ns)
            if bases != (Record,):
                raise TypeError("a Record inherits from Record alone")
            fields = list(ns.get("__annotations__", {}))
            defaulted: list[str] = []
            for field in fields:
                if field in ns:
                    defaulted.append(field)
                elif defaulted:
                    raise TypeError(f"Non-default namedtuple field {field} cannot follow default field"
                                    f"{'s' if len(defaulted) > 1 else ''} {', '.join(defaulted)}")
            cls = namedtuple(name, fields, defaults=[ns[f] for f in defaulted], module=ns["__module__"])
            cls.__annotations__ = dict(ns.get("__annotations__", {}))  # the strings, as written
            for key, value in ns.items():
                if key in _PROHIBITED:
                    raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
                if key not in _SPECIAL and key not in fields:
                    setattr(cls, key, value)
            return cls

    class Record(metaclass=_Meta):
        """Base of a Record class (never instantiated itself)."""
