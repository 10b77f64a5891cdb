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


def make_joined(text: str) -> str:
    """The Makefile with its backslash-newline continuations joined as make joins them: into one space."""
    return re.sub(r"\\\n\s*", " ", text)


def docker_instructions(text: str) -> list[str]:
    """The Dockerfile's instructions, each joined as Docker's parser joins it: a line ending in a backslash (white space
    after it allowed) loses the backslash and is followed directly by the next line; comment lines inside an
    instruction are dropped."""
    instructions, current = [], None
    for line in text.splitlines():
        if current is not None and line.lstrip().startswith("#"):
            continue
        if current is None:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            current = ""
        match = re.search(r"\\[ \t]*$", line)
        if match:
            current += line[: match.start()]
        else:
            instructions.append(current + line)
            current = None
    if current is not None:
        instructions.append(current)
    return instructions


def makefile_flags(text: str) -> list[str]:
    match = re.search(r"^RELEASE_FLAGS\s*=\s*(.*)$", make_joined(text), re.MULTILINE)
    if not match:
        sys.exit("check-release-flags: the Makefile has no RELEASE_FLAGS")
    flags = match.group(1).replace("$(CURDIR)", "/src")
    # A variable of the Makefile's own inside the flags (PACKED_RELOCATIONS) counts with its default value.
    for name in re.findall(r"\$\((\w+)\)", flags):
        value = re.search(rf"^{name}\s*\??=[ \t]*(.*)$", make_joined(text), re.MULTILINE)
        if not value:
            sys.exit(f"check-release-flags: RELEASE_FLAGS names $({name}), which the Makefile does not set")
        flags = flags.replace(f"$({name})", value.group(1))
    return shlex.split(flags)


def commands(script: str) -> list[list[str]]:
    """The simple commands of a shell script, each as its words split at white space, quotes kept (so a quoted
    `"$RELEASE_FLAGS"`, one argument, is not the flags); a command substitution `$(…)` is one word."""
    script = re.sub(r"\$\([^()]*\)", "$(…)", script)
    return [words for part in re.split(r"&&|\|\||;|\|", script) if (words := part.split())]


def dockerfile_flags(text: str) -> tuple[list[str] | None, list[str]]:
    """The Dockerfile's ENV RELEASE_FLAGS (None when missing), and what is wrong with its `swift build` commands: one
    that does not pass `$RELEASE_FLAGS` as words of its own, or one before the ENV that sets them."""
    flags = None
    problems = []
    for instruction in docker_instructions(text):
        env = re.match(r'^ENV\s+RELEASE_FLAGS\s*=\s*"(.*)"\s*$', instruction)
        if env:
            flags = shlex.split(env.group(1))
            continue
        if not instruction.startswith("RUN"):
            continue
        for words in commands(instruction[len("RUN") :]):
            if words[0] != "swift" or "build" not in words[1:2] or "--show-bin-path" in words:
                continue
            command = " ".join(words)[:120]
            if flags is None:
                problems.append(f"builds before it sets RELEASE_FLAGS: {command}")
            elif not {"$RELEASE_FLAGS", "${RELEASE_FLAGS}"} & set(words):
                problems.append(f"builds without $RELEASE_FLAGS: {command}")
    return flags, problems


def main() -> int:
    makefile = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "Makefile"
    dockerfile = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else root / "deploy/Dockerfile"
    wanted = makefile_flags(makefile.read_text())
    flags, wrong = dockerfile_flags(dockerfile.read_text())
    problems = []
    if flags is None:
        problems.append(f"{dockerfile} sets no ENV RELEASE_FLAGS")
    elif flags != wanted:
        problems.append(f"{dockerfile}'s RELEASE_FLAGS differ from the Makefile's:\n  image: {flags}\n  make:  {wanted}")
    problems += [f"{dockerfile} {problem}" for problem in wrong]
    if problems:
        for problem in problems:
            print(f"check-release-flags: {problem}", file=sys.stderr)
        return 1
    print(f"ok  the image is built with make release's flags ({len(wanted)} arguments)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
