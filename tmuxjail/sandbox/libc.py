"""syscall(2) and prctl(2) of this process's libc, for the launcher (the keyring, Landlock), through
_ctypes, the C half of ctypes: importing ctypes' Python half costs the launcher more than all it
does besides (issue 18.3). The calls are the ones ctypes.CDLL(None, use_errno=True) makes: a
Python int is passed as a C int, None as NULL, bytes as a pointer to their (read-only) bytes."""

from __future__ import annotations

import _ctypes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    _Int = _ctypes._SimpleCData[int]
else:
    _Int = _ctypes._SimpleCData


class c_long(_Int):
    _type_ = "l"


class c_size_t(_Int):
    _type_ = "L"


class c_uint32(_Int):
    _type_ = "I"


class _Function(_ctypes.CFuncPtr):
    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
    _restype_ = c_long


class _Self:
    """What CFuncPtr((name, library)) reads of a library: its dlopen handle (this process)."""

    _handle = _ctypes.dlopen(None)  # type: ignore[arg-type]  # None: this process, as CDLL(None)


def _function(name: str) -> Callable[..., int]:
    return _Function((name, _Self))  # type: ignore[arg-type]  # duck-typed: CFuncPtr reads only _handle


syscall = _function("syscall")
prctl = _function("prctl")
unshare = _function("unshare")
mount = _function("mount")
setns = _function("setns")
get_errno: Callable[[], int] = _ctypes.get_errno
