#!/usr/bin/env python3
"""The layer rule of docs/architecture.md, checked on every #include.

Each file of src/ and kernels/ belongs to one layer (LAYERS, first match of
its path wins). A file may include files of its own layer and of layers
below it; an include of a higher layer is an upward include and fails this
check, naming the file, the line and both layers. The includes that break
the rule today are listed in KNOWN (with the debt they belong to, see
"Known debts" in docs/architecture.md): they are reported but do not fail,
and a KNOWN entry that no longer occurs fails, so the list only shrinks.

A layer may also have a face (FACES): the only files of it that files of
other layers may include. Note [the runtime's face]: the layers above the
runtime use it through the public API and src/runtime/job.h alone, so
runtime/communicator_impl.h, the watchdog and setup are the runtime's own;
an include of another file of a layer with a face, from outside it, fails
like an upward include.

  tools/check_layers.py [REPO_ROOT]      exit 0: no new upward include
"""
import os
import re
import sys

# Bottom to top. Paths are relative to the repository root; a path ending in
# "/" matches a folder, anything else a file-name prefix.
LAYERS = [
    ("base", ["include/gradwire/", "src/base/"]),
    ("kernels", ["kernels/"]),
    ("bootstrap", ["src/bootstrap/"]),
    ("transport", ["src/transport/"]),
    ("collectives", ["src/collectives/"]),
    ("shm", ["src/shm/"]),
    ("diag", ["src/diag/"]),
    ("device", ["src/device/"]),
    ("runtime", ["src/runtime/"]),
    ("reducer", ["src/reducer/"]),
    ("sharded", ["src/sharded/"]),
    ("compress", ["src/compress/"]),
    ("checkpoint", ["src/checkpoint/"]),
    ("elastic", ["src/elastic/"]),
    ("torch", ["src/torch/", "include/gradwire/torch/"]),
]
# include/gradwire/torch/ is matched before include/gradwire/ (longest prefix).
# The same order as GRADWIRE_LAYERS in CMakeLists.txt, whose include views
# make an upward include a build error (Note [layer include views]); this
# check also covers headers that no .cpp of their layer includes.
ORDER = {name: i for i, (name, _) in enumerate(LAYERS)}

# (including file, included file): the debt it belongs to. Empty since the
# device layer gets its communicator as a Host (Note [device host]) and
# allocate_shared moved to the runtime; entries may only be removed.
KNOWN = {}

# Note [the runtime's face]: a layer's files that other layers may include.
# A face of the form "folder/" covers that folder (a layer's contract and
# its implementations' own headers stay inside).
FACE_NOTE = "Note [the runtime's face] in tools/check_layers.py"
FACES = {
    "runtime": ["src/runtime/job.h"],
    # Note [the one-host path] in src/shm/shm.h: the contract.
    "shm": ["src/shm/shm.h"],
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    best = None
    for name, prefixes in LAYERS:
        for p in prefixes:
            if path.startswith(p) and (best is None or len(p) > best[1]):
                best = (name, len(p))
    return best[0] if best else None


def resolve(root, including, name):
    for base in (os.path.dirname(including), "src", "", "include"):
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    found = {}
    faces = {}
    for top in ("src", "kernels", "include"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), root)
                mine = layer_of(path)
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as fh:
                    for lineno, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = resolve(root, path, m.group(1))
                        theirs = layer_of(target) if target else None
                        if mine and theirs and ORDER[theirs] > ORDER[mine]:
                            found[(path, target)] = (lineno, mine, theirs)
                        elif (mine != theirs and theirs in FACES and
                              not any(target == f or (f.endswith("/") and target.startswith(f))
                                      for f in FACES[theirs])):
                            faces[(path, target)] = (lineno, mine, theirs)
    new = {k: v for k, v in found.items() if k not in KNOWN}
    gone = [k for k in KNOWN if k not in found]
    for (src, dst), (lineno, mine, theirs) in sorted(found.items()):
        why = f" [known debt: {KNOWN[(src, dst)]}]" if (src, dst) in KNOWN else ""
        tag = "known" if why else "NEW"
        print(f"{tag}: {src}:{lineno} ({mine}) includes {dst} ({theirs}){why}")
    for src, dst in gone:
        print(f"FIXED: {src} no longer includes {dst}: remove it from KNOWN in tools/check_layers.py")
    for (src, dst), (lineno, mine, theirs) in sorted(faces.items()):
        print(f"NEW: {src}:{lineno} ({mine}) includes {dst}, behind the {theirs} layer's face: "
              f"outside src/{theirs}/ include only {', '.join(FACES[theirs])} (" + FACE_NOTE + ")")
    print(f"check_layers: {len(found)} upward includes, {len(new)} new, {len(gone)} fixed but "
          f"still listed; {len(faces)} includes behind a layer's face")
    return 1 if new or gone or faces else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
