"""`python -m kvremap`: whether kvremap's library is loaded in this interpreter, and the settings it reads.

Exit status 0 when it is loaded, 1 when it is not (with what to run instead).
"""

import os
import sys

import kvremap

# The settings that say where a start's traces and profiles go and what the library does; the library's own
# defaults where unset (docs/configuration.md).
_SHOWN = (
    ("KVREMAP_MODE", "defer"),
    ("KVREMAP_TRACE_DIR", "."),
    ("KVREMAP_PROFILE_DIR", "$XDG_CACHE_HOME/kvremap or ~/.cache/kvremap"),
    ("KVREMAP_LOG_LEVEL", "warn"),
)


def _library_path():
    """The loaded libkvremap.so's path from this process's memory map, or None."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if os.path.basename(path).startswith("libkvremap.so"):
                    return path
    except OSError:
        pass
    return None


def main():
    if not kvremap.available():
        print("kvremap is not loaded in this process: run the program under `kvremap run -- COMMAND`, "
              "or with LD_PRELOAD=\"$(kvremap libpath)\"")
        return 1
    where = _library_path()
    print(f"kvremap {kvremap.version()} is loaded in this process" + (f" ({where})" if where else ""))
    for name, default in _SHOWN:
        value = os.environ.get(name)
        print(f"  {name}={value!r}" if value is not None else f"  {name} unset: {default}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
