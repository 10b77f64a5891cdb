#!/usr/bin/env python3
"""Holds the image's build to `make release`'s layout: deploy/Dockerfile's RELEASE_FLAGS must be the Makefile's
RELEASE_FLAGS (its `$(CURDIR)` being the build stage's /src), and every `swift build` of the Dockerfile must pass them.

    scripts/check-release-flags.py [MAKEFILE [DOCKERFILE]]

Prints one ok line, or what differs and exits 1.
"""
import pathlib
import re
import shlex
import sys

root = pathlib.Path(__file__).resolve().parent.parent


def joined(text: str) -> str:
    """The text with its backslash-newline continuations joined, as make and the Dockerfile parser join them."""
    return re.sub(r"\\\n", " ", text)


def makefile_flags(text: str) -> list[str]:
    match = re.search(r"^RELEASE_FLAGS\s*=\s*(.*)$", joined(text), re.MULTILINE)
    if not match:
        sys.exit("check-release-flags: the Makefile has no RELEASE_FLAGS")
    return shlex.split(match.group(1).replace("$(CURDIR)", "/src"))


def dockerfile_flags(text: str) -> tuple[list[str] | None, list[str]]:
    """The Dockerfile's ENV RELEASE_FLAGS (None when missing), and its `swift build` commands lacking them."""
    lines = joined(text).splitlines()
    flags = None
    lacking = []
    for line in lines:
        env = re.match(r'^ENV\s+RELEASE_FLAGS\s*=\s*"(.*)"\s*$', line)
        if env:
            flags = shlex.split(env.group(1))
        if line.startswith("RUN") and re.search(r"swift build -c release --product", line):
            if "$RELEASE_FLAGS" not in line:
                lacking.append(line.strip())
    return flags, lacking


def main() -> int:
    makefile = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "Makefile"
    dockerfile = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else root / "deploy/Dockerfile"
    wanted = makefile_flags(makefile.read_text())
    flags, lacking = dockerfile_flags(dockerfile.read_text())
    problems = []
    if flags is None:
        problems.append(f"{dockerfile} sets no ENV RELEASE_FLAGS")
    elif flags != wanted:
        problems.append(f"{dockerfile}'s RELEASE_FLAGS differ from the Makefile's:\n  image: {flags}\n  make:  {wanted}")
    for line in lacking:
        problems.append(f"{dockerfile} builds without $RELEASE_FLAGS: {line[:120]}")
    if problems:
        for problem in problems:
            print(f"check-release-flags: {problem}", file=sys.stderr)
        return 1
    print(f"ok  the image is built with make release's flags ({len(wanted)} arguments)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
