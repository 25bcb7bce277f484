"""kvremap from Python: tag the KV cache an engine allocates itself, commit it, know whether kvremap is loaded.

Pure Python over ctypes: the functions are the C API (kvremap.h) of the library that LD_PRELOAD (or
`kvremap run`) put in this process. Without that library every call does nothing and says so by its
result, so an engine using this module runs unchanged without kvremap:

    import kvremap
    with kvremap.tag("kv"):              # what this thread allocates here is the KV cache
        kv = [torch.zeros(shape, dtype=torch.int8, device="cuda") for _ in range(num_layers)]
    ...                                  # start-up work: autotuning, graph capture
    kvremap.commit()                     # before the first request, where the engine knows it
"""

import contextlib
import ctypes

__all__ = ["available", "commit", "tag", "version", "TAGS"]

# The tags kvremap_tag_push accepts: "kv" marks the KV cache, "none" an untagged region inside one.
TAGS = ("kv", "none")


def _load():
    """The preloaded library's C API, or None when kvremap is not in this process."""
    try:
        process = ctypes.CDLL(None)
        push = process.kvremap_tag_push
        pop = process.kvremap_tag_pop
        commit_now = process.kvremap_commit
        version_of = process.kvremap_version
    except (OSError, AttributeError):
        return None
    push.argtypes, push.restype = [ctypes.c_char_p], ctypes.c_int
    pop.argtypes, pop.restype = [], ctypes.c_int
    commit_now.argtypes, commit_now.restype = [], ctypes.c_int
    version_of.argtypes, version_of.restype = [], ctypes.c_char_p
    return push, pop, commit_now, version_of


_api = _load()


def available():
    """True when kvremap's library is loaded in this process (never an exception)."""
    return _api is not None


def version():
    """kvremap's version ("MAJOR.MINOR.PATCH"), or None without the library."""
    return _api[3]().decode() if _api else None


@contextlib.contextmanager
def tag(name="kv"):
    """Allocations this thread makes inside the block carry `name` ("kv": they are the KV cache).

    Nests up to 32 deep. Without the library the block just runs. A name kvremap does not know is a
    ValueError, with or without the library, so a typo never goes unnoticed.
    """
    if name not in TAGS:
        raise ValueError(f"kvremap.tag: {name!r} is not a tag; expected one of {', '.join(TAGS)}")
    if _api is None:
        yield
        return
    if _api[0](name.encode()) != 0:
        raise RuntimeError(f"kvremap.tag: tags nest at most 32 deep; {name!r} would be deeper")
    try:
        yield
    finally:
        _api[1]()


def commit():
    """Commits the deferred KV cache now; True when it was committed, False when there was nothing to
    commit (already committed, never deferred, a capture open) or kvremap is not loaded."""
    return _api is not None and _api[2]() == 0
