#!/usr/bin/env python3
"""Check that every cited Note is defined somewhere in the tree.

gradwire explains its non-obvious decisions in GHC-style notes: one comment
block defines a note, and the places that depend on it cite it by name.

Usage: check_notes.py [REPO_ROOT] [--list]
  REPO_ROOT  the repository root (default: the parent of this file's tools/)
  --list     also print every defined note with where it is defined

Exit status: 0 if every cited note is defined, 1 if some are not (each is
listed with the file:line of its citations), 2 on a usage error.

What is scanned: the directories src/ include/ kernels/ python/ tools/
tests/ benchmarks/ examples/ scripts/ cmake/ docs/ (recursively, text files
only; build outputs, caches and hidden directories are skipped), the root
CMakeLists.txt, README.md and BENCHMARKS.md. This script itself is not
scanned (its own examples would count as citations).

The rule, line by line:

* A *mention* is the word "Note", whitespace, then a name in square
  brackets. The name may wrap onto the next line(s) of the same comment or
  paragraph: when a line ends inside "Note [..." (or with the word "Note"),
  the next line is appended, after dropping its indentation and a leading
  comment marker (//, /*, *, #). Whitespace runs in a name count as one
  space; names are case-sensitive.

* A mention is a *definition* when all of these hold:
    - it is in a source file (not a Markdown file: docs cite notes, code
      defines them);
    - it opens a comment line: the line is indentation, a comment marker
      (//, ///, /*, *, #), optional spaces, then the mention;
    - the closing bracket is followed by a colon or by the end of the line
      (trailing spaces allowed).
  So both of these define [foo]:
        // Note [foo]: the text starts on this line ...
        # Note [foo]
        # the text starts on the next line ...
  while these only cite it:
        // ... as Note [foo] explains          (not at the start)
        // Note [foo] in src/base/foo.h: ...   (followed by " in")
        // Note [foo]; small buffers stay ...  (followed by ";")
  A note may have several definition-shaped lines (a second one is
  usually a local continuation of the same note); that is allowed.

* Every other mention is a *citation*. A note is *undefined* when it is
  cited and has no definition anywhere in the scanned files.
"""

from __future__ import annotations

import os
import re
import sys
from collections import defaultdict

SCAN_DIRS = ("src", "include", "kernels", "python", "tools", "tests",
             "benchmarks", "examples", "scripts", "cmake", "docs")
SCAN_FILES = ("CMakeLists.txt", "README.md", "BENCHMARKS.md")
SKIP_DIRS = {"build", "__pycache__", "node_modules", "corpus", "figures"}
SKIP_SUFFIXES = (".so", ".a", ".o", ".pyc", ".png", ".svg", ".pdf", ".gz",
                 ".bin", ".npy", ".pt")
MARKDOWN_SUFFIXES = (".md", ".markdown")
MAX_BYTES = 4 * 1024 * 1024

MENTION = re.compile(r"\bNote\s+\[([^\]]+)\]")
# A line whose comment starts with a mention whose bracket closes before ':' or
# the end of the line.
DEFINITION = re.compile(
    r"^\s*(?://+|/\*+|\*+|#+)\s*Note\s+\[([^\]]+)\]\s*(?::|$)")
# A line that leaves a mention open: "Note [name start" or a final "Note".
OPEN_AT_END = re.compile(r"\bNote(?:\s+\[[^\]]*)?\s*$")
LEADER = re.compile(r"^\s*(?://+|/\*+|\*+(?!/)|#+)?\s*")
MAX_JOIN = 3  # lines a name may wrap over


def normalise(name: str) -> str:
    return " ".join(name.split())


def files_to_scan(root: str):
    me = os.path.realpath(__file__)
    for name in SCAN_FILES:
        path = os.path.join(root, name)
        if os.path.isfile(path):
            yield path
    for top in SCAN_DIRS:
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(
                d for d in dirnames
                if not d.startswith(".") and d not in SKIP_DIRS
                and not d.endswith(".egg-info"))
            for f in sorted(filenames):
                path = os.path.join(dirpath, f)
                if f.endswith(SKIP_SUFFIXES) or not os.path.isfile(path):
                    continue
                if os.path.realpath(path) == me:
                    continue
                yield path


def read_lines(path: str):
    try:
        if os.path.getsize(path) > MAX_BYTES:
            return None
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if b"\0" in data:
        return None  # binary
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.splitlines()


def scan_file(path: str, rel: str, defs, cites):
    lines = read_lines(path)
    if lines is None:
        return
    markdown = path.endswith(MARKDOWN_SUFFIXES)
    for i, line in enumerate(lines):
        if "Note" not in line:
            continue
        # Join wrapped names: append following lines while this one ends
        # inside a mention.
        joined = line
        j = i
        while OPEN_AT_END.search(joined) and j + 1 < len(lines) and j - i < MAX_JOIN:
            j += 1
            joined = joined.rstrip() + " " + LEADER.sub("", lines[j], count=1)
        where = f"{rel}:{i + 1}"
        definition = None if markdown else DEFINITION.match(joined)
        for m in MENTION.finditer(joined):
            if m.start() >= len(line):
                break  # starts on a later line; counted there
            name = normalise(m.group(1))
            if definition is not None and m.start(1) == definition.start(1):
                defs[name].append(where)
            else:
                cites[name].append(where)


def main(argv) -> int:
    args = [a for a in argv[1:] if not a.startswith("-")]
    flags = [a for a in argv[1:] if a.startswith("-")]
    if len(args) > 1 or any(f not in ("--list", "-h", "--help") for f in flags):
        usage = next(p for p in __doc__.split("\n\n") if p.startswith("Usage:"))
        print(usage, file=sys.stderr)
        return 2
    if "-h" in flags or "--help" in flags:
        print(__doc__)
        return 0
    root = args[0] if args else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    root = os.path.abspath(root)
    if not os.path.isdir(os.path.join(root, "src")):
        print(f"check_notes: {root} does not look like the repository root "
              "(no src/)", file=sys.stderr)
        return 2

    defs = defaultdict(list)
    cites = defaultdict(list)
    nfiles = 0
    for path in files_to_scan(root):
        nfiles += 1
        scan_file(path, os.path.relpath(path, root), defs, cites)

    if "--list" in flags:
        for name in sorted(defs, key=str.lower):
            print(f"Note [{name}]: {', '.join(defs[name])}")
        print()

    undefined = sorted((n for n in cites if n not in defs), key=str.lower)
    ncites = sum(len(v) for v in cites.values())
    if undefined:
        print(f"check_notes: {len(undefined)} cited note(s) defined nowhere "
              f"(a definition is a comment line starting 'Note [name]:' or "
              f"'Note [name]' alone; see tools/check_notes.py):")
        for name in undefined:
            print(f"  Note [{name}]")
            for where in cites[name]:
                print(f"    cited at {where}")
        return 1
    print(f"check_notes: {len(defs)} notes defined, {ncites} citations, "
          f"all defined ({nfiles} files scanned)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except BrokenPipeError:  # output piped into head(1) and the like
        sys.exit(1)
