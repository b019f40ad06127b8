"""The evermind-vk command: `build_parser` assembles one subcommand per family module (devices, train,
generate, pack/inspect/verify, profile, video) and `main` runs it, reporting any failure as one line."""
from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version

from .. import __version__
from ..errors import EvermindError
from ..runtime import knobs
from . import devices, files, generate, profiling, train, video
from .common import CliError, Parser, describe, error

__all__ = ["CliError", "build_parser", "main", "version_line"]


def version_line() -> str:
    """evermind-vk's version and the kp build it runs on (ours reports 0.9.0+evermind1)."""
    try:
        kp_version = version("kp")
    except PackageNotFoundError:
        kp_version = "not installed (run `bash ci/setup.sh`)"
    return f"evermind-vk {__version__} (kp {kp_version})"


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: `evermind-vk COMMAND ...`."""
    fmt = argparse.ArgumentDefaultsHelpFormatter
    ap = Parser(prog="evermind-vk", description="Train and run small models on Vulkan.", formatter_class=fmt)
    ap.add_argument("--version", action="version", version=version_line())
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    devices.add_parsers(sub)
    train.add_parser(sub)
    generate.add_parser(sub)
    files.add_parsers(sub)
    profiling.add_parser(sub)
    video.add_parser(sub)
    return ap


def main(argv=None) -> int:
    """Run the command; every failure is one line `evermind-vk: error: ...` on stderr and exit code 2
    (1 for a failed `verify`), never a traceback (EVERMIND_VK_TRACEBACK=1 shows it, for bug reports)."""
    try:
        args = build_parser().parse_args(argv)
    except CliError as e:
        error(str(e))
        return 2
    except SystemExit as e:  # --help, --version
        return e.code if isinstance(e.code, int) else 0
    if getattr(args, "time_limit", None) == 0:
        args.time_limit = None
    if getattr(args, "top_k", None) == 0:
        args.top_k = None
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        error("interrupted")
        return 130
    except (EvermindError, OSError, UnicodeDecodeError, ValueError, MemoryError) as e:
        if knobs.get("EVERMIND_VK_TRACEBACK"):
            raise
        prefix = "" if isinstance(e, (CliError, OSError)) else f"{type(e).__name__}: "
        error(prefix + describe(e))
        return 2
    except Exception as e:  # a bug: still one line, with how to see more
        if knobs.get("EVERMIND_VK_TRACEBACK"):
            raise
        error(f"internal error {type(e).__name__}: {describe(e)} (please report it; "
               "EVERMIND_VK_TRACEBACK=1 shows the traceback)")
        return 2
