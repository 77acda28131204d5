"""Canonical JSON and fingerprints: shared by policy (which makes them) and the launcher (which
re-checks them and reads its spec with loads), so it stays stdlib-only and cheap to import.

The launcher runs on every start, and importing the json package (it pulls in re and enum) costs
it as much as the interpreter's own start-up. So the C accelerator that json.dumps and json.loads
run underneath is called directly when it is there, with the same arguments json passes it; json
itself is the fallback (another Python, or a build without _json). Likewise sha256 comes from the
interpreter's own module rather than hashlib (which loads OpenSSL)."""

from __future__ import annotations

try:  # what json.dumps and json.loads run underneath
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None  # type: ignore[assignment]

# The interpreter's own sha256 (private modules, without type stubs).
try:
    from _sha256 import sha256 as _sha256  # type: ignore[import-not-found]  # Python 3.11
except ImportError:  # pragma: no cover - depends on the Python version
    try:
        from _sha2 import sha256 as _sha256  # type: ignore[import-not-found]  # Python 3.12+
    except ImportError:
        from hashlib import sha256 as _sha256

sha256 = _sha256  # without hashlib's import (~5 ms): the launcher hashes a changed executable with it

_WHITESPACE = " \t\n\r"  # JSON's own whitespace


def hmac_sha256(key: bytes, body: bytes) -> str:
    """hmac.new(key, body, "sha256").hexdigest() (RFC 2104 over the sha256 above): the hmac
    module loads OpenSSL (~2.5 ms of every warm start, which checks one cache entry's MAC)."""
    if len(key) > 64:
        key = _sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = _sha256(bytes(k ^ 0x36 for k in key) + body).digest()
    return str(_sha256(bytes(k ^ 0x5C for k in key) + inner).hexdigest())


def same(a: bytes, b: bytes) -> bool:
    """a == b, in a time that does not depend on where they differ (as hmac.compare_digest)."""
    if len(a) != len(b):
        return False
    diff = 0
    for x, y in zip(a, b, strict=True):
        diff |= x ^ y
    return diff == 0


def _not_serializable(o: object) -> object:
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def canonical_json(data: object) -> str:
    """json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)."""
    if _json is not None and not isinstance(data, str):
        try:  # json.JSONEncoder.iterencode's own call, for these settings
            encode = _json.make_encoder({}, _not_serializable, _json.encode_basestring, None, ":", ",",
                                        True, False, True)
        except TypeError:  # pragma: no cover - a Python whose accelerator takes other arguments
            pass
        else:
            return "".join(encode(data, 0))
    import json

    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class _Decoder:
    """The attributes json's C scanner reads from a json.JSONDecoder(), at their defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # -Infinity, Infinity, NaN: what json's defaults make of them too


def loads(data: bytes | str) -> object:
    """json.loads(data) for UTF-8 text: one JSON value, whitespace around it. ValueError (or
    RecursionError, as json.loads) for anything else."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data  # UnicodeDecodeError: a ValueError
    if _json is None:  # pragma: no cover
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        # The scanner reads these attributes from any object (json passes its JSONDecoder).
        value, end = _json.make_scanner(_Decoder)(text, start)  # type: ignore[arg-type]
    except StopIteration:
        raise ValueError("expecting a JSON value") from None
    except SystemError:
        # A malformed object or string: the C scanner's error path wants json.decoder's
        # JSONDecodeError, which this module does not load, and fails without an exception.
        raise ValueError("not valid JSON") from None
    if text[end:].strip(_WHITESPACE):
        raise ValueError("extra data after the JSON value")
    return value


def fingerprint(data: object) -> str:
    digest: str = _sha256(canonical_json(data).encode("utf-8")).hexdigest()
    return "sha256:" + digest


def sha256_hex(data: bytes) -> str:
    """sha256 of bytes, hex (without hashlib's OpenSSL)."""
    digest: str = _sha256(data).hexdigest()
    return digest
