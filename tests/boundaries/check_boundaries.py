#!/usr/bin/env python3
"""The architecture's boundaries, checked on the source tree (docs/ARCHITECTURE.md):

1. No code outside src/backends/cpu, src/backends/cuda and the backend factory names a backend ("cpu", "cuda") or
   asks whether CUDA was compiled in (KILN_HAVE_CUDA). Comments do not count.
2. tools/ includes public headers ("kiln/...") and the tools' own headers only: a file in a tools/ folder (its own or
   another tool's library, as kiln serve's is to the kiln command), or a header protoc generates from a .proto under
   tools/.
3. No op-name tables outside src/ops and the backends: the planner, passes and conformance runner read OpDef
   traits (a std::set/array of op-type strings there fails this check).

Usage: check_boundaries.py REPO_ROOT   (exit 1 with one line per violation)
"""
import os
import re
import sys

SOURCE_EXT = (".cpp", ".h", ".cu", ".cuh")
BACKEND_NAME = re.compile(r'"(cpu|cuda)"|KILN_HAVE_CUDA')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# Three or more quoted CamelCase op names in one initializer: an op table.
OP_TABLE = re.compile(r'(\"[A-Z][A-Za-z]+\"\s*,\s*){3,}')


def code_part(line):
    """The line without a trailing // comment (quotes are not parsed: good enough for these patterns)."""
    i = line.find("//")
    return line if i < 0 else line[:i]


def sources(root, folder):
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for f in sorted(files):
            if f.endswith(SOURCE_EXT):
                yield os.path.join(dirpath, f)


# Files exempt from rule 1, with the reason: the text of the project `kiln plugin new` writes (its own test picks
# the cpu or cuda backend by name, as any user of the public API may).
TEMPLATES = ("tools/kiln/plugin_template.cpp",)


def tools_headers(root):
    """Header names the tools may include: those in tools/ folders, and the protoc outputs of tools' .proto files."""
    names = set()
    for dirpath, _, files in os.walk(os.path.join(root, "tools")):
        for f in files:
            if f.endswith((".h", ".cuh")):
                names.add(f)
            elif f.endswith(".proto"):
                stem = f[:-len(".proto")]
                names.update({stem + ".pb.h", stem + ".grpc.pb.h"})
    return names


def main(root):
    bad = []
    own_headers = tools_headers(root)
    allowed_backend = ("src/backends/cpu/", "src/backends/cuda/", "src/backends/factory.")
    for folder in ("src", "tools"):
        for path in sources(root, folder):
            rel = os.path.relpath(path, root)
            if rel in TEMPLATES:
                continue
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
            for no, line in enumerate(lines, 1):
                code = code_part(line)
                if BACKEND_NAME.search(code) and not rel.startswith(allowed_backend):
                    bad.append(f"{rel}:{no}: names a backend outside src/backends/: {line.strip()}")
                if rel.startswith("tools/"):
                    m = INCLUDE.match(line)
                    if m and not m.group(1).startswith("kiln/") and \
                            not os.path.exists(os.path.join(os.path.dirname(path), m.group(1))) and \
                            m.group(1) not in own_headers:
                        bad.append(f"{rel}:{no}: includes a non-public header: {line.strip()}")
                if rel.startswith(("src/plan/", "src/passes/", "src/quant/", "tools/conformance/")) and OP_TABLE.search(code):
                    bad.append(f"{rel}:{no}: an op-name table (read OpDef traits instead): {line.strip()}")
    for b in bad:
        print(b)
    print(f"check_boundaries: {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
