#!/usr/bin/env python3
"""Lists, for the default ONNX domain, every operator version after opset FROM (default 21, the newest kiln imports)
and what changed from the version before it, from the operator schemas of whichever onnx runs it:
  types      only the type constraints changed (same attributes, inputs, outputs and documentation): a kernel of the
             previous version computes it for the types it already takes;
  signature  attributes, inputs or outputs changed;
  doc        the documentation changed (the semantics may have);
  new        the operator's first version.
Issue 12 uses it to decide which ops the importer may resolve at newer opsets as they are and which need work first.

Usage: PYTHONPATH=<a newer onnx> tools/gen/onnx_version_changes.py [FROM]
"""
import sys

import onnx
from onnx import defs


def signature(s):
    attrs = sorted((name, a.type, a.required) for name, a in s.attributes.items())
    return attrs, [(i.name, i.option) for i in s.inputs], [(o.name, o.option) for o in s.outputs]


def main():
    first = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    history = {}
    for s in defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx"):
            history.setdefault(s.name, {})[s.since_version] = s
    print(f"# onnx {onnx.__version__}, opset {defs.onnx_opset_version()}: operator versions after opset {first}")
    for name in sorted(history):
        versions = history[name]
        for v in sorted(versions):
            if v <= first:
                continue
            earlier = [u for u in versions if u < v]
            if not earlier:
                print(f"{name}-{v}: new")
                continue
            prev, cur = versions[max(earlier)], versions[v]
            kinds = []
            if signature(prev) != signature(cur):
                kinds.append("signature")
            if prev.doc.strip() != cur.doc.strip():
                kinds.append("doc")
            print(f"{name}-{v}: {', '.join(kinds) or 'types'} (from {name}-{max(earlier)})")


if __name__ == "__main__":
    main()
