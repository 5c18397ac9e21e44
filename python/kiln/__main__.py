"""python -m kiln benchmark --model M.onnx --compare onnxruntime[,torch] [--iterations N] [--fp16] [--backend B]
[--shapes name:1x3x224x224,...] [--json F]: kiln and the other frameworks on the same inputs, one table
(kiln._compare). `kiln benchmark --model M --compare=...` runs this."""
import argparse
import json
import sys

from . import KilnError
from ._compare import compare_frameworks


def _shapes(spec):
    out = {}
    for item in filter(None, (spec or "").split(",")):
        name, _, dims = item.rpartition(":")
        if not name:
            raise SystemExit(f"--shapes: '{item}' is not name:AxBxC")
        out[name] = [int(d) for d in dims.split("x")]
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m kiln")
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("benchmark", help="kiln against onnxruntime (and torch) on the same model and inputs")
    b.add_argument("--model", required=True)
    b.add_argument("--compare", default="onnxruntime", help="onnxruntime (torch needs a module: use the Python API)")
    b.add_argument("--iterations", type=int, default=50)
    b.add_argument("--warmup", type=int, default=5)
    b.add_argument("--fp16", action="store_true")
    b.add_argument("--backend", default=None)
    b.add_argument("--shapes", default=None)
    b.add_argument("--json", default=None)
    a = p.parse_args(argv)
    frameworks = [f for f in a.compare.split(",") if f]
    if "torch" in frameworks:
        p.error("--compare=torch needs the model as a torch module: call kiln.compare_frameworks(..., torch_module=m)")
    kwargs = {"fp16": a.fp16}
    if a.backend:
        kwargs["backend"] = a.backend
    if a.shapes:
        kwargs["shapes"] = _shapes(a.shapes)
    try:
        report = compare_frameworks(a.model, frameworks=frameworks, iterations=a.iterations, warmup=a.warmup, **kwargs)
    except KilnError as e:
        print(f"kiln: error: {e}", file=sys.stderr)
        return 1
    except ImportError as e:
        print(f"kiln: error: --compare={a.compare} needs {e.name}, which this Python lacks (pip install it)",
              file=sys.stderr)
        return 1
    report["status"] = "success"
    report["input_model"] = a.model
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))  # the report last on stdout, as the other workflow commands print theirs
    return 0


if __name__ == "__main__":
    sys.exit(main())
