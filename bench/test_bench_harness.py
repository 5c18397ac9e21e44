"""Tests of the harness's pure-Python parts (no torch, no GPU): arguments, plans, kiln commands and reports, tables."""
import importlib.util
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_zoo  # noqa: E402
import report  # noqa: E402
import run_bench  # noqa: E402
import zoo  # noqa: E402

# The layout kiln writes: BuildReport::ToJson (src/runtime/builder_config.cpp) and RunInference (tools/kiln/infer_cmd.cpp).
BUILD = {"operation": "build", "status": "success", "backend": "cuda", "device": "NVIDIA H100",
         "configuration": {"precision": "fp16", "tf32": True},
         "optimization": {"layers_after": 57, "timing_cache_hits": 3, "tuning_time_s": 1.5},
         "memory": {"arena_bytes": 50 * 2**20, "naive_activation_bytes": 200 * 2**20},
         "performance": {"build_time_s": 12.5, "engine_size_mb": 49.0, "estimated_latency_ms": 0.9}}


def run_report(median, qps, graph=True):
    stats = {"min": median * 0.9, "max": median * 2, "mean": median, "median": median, "p50": median, "p99": median * 1.5}
    return {"status": "success", "operation": "bench",
            "inference": {"backend": "cuda", "cuda_graph": graph, "streams": 1, "inferences": 500, "walltime_s": 3.1,
                          "throughput_qps": qps, "latency_ms": stats, "enqueue_ms": stats, "h2d_ms": stats,
                          "compute_ms": dict(stats, median=median * 0.98), "d2h_ms": stats,
                          "input_shapes": {"input": [1, 3, 224, 224]}}}


def test_parse_models():
    assert zoo.parse_models("all") == list(zoo.SPECS)
    assert zoo.parse_models("bert_base, resnet50") == ["bert_base", "resnet50"]
    with pytest.raises(ValueError, match="nope"):
        zoo.parse_models("resnet50,nope")


def test_specs_shapes():
    assert zoo.SPECS["resnet50"].kiln_shapes(64) == "input:64x3x224x224"
    assert zoo.SPECS["bert_base"].kiln_shapes(1) == "input_ids:1x128"
    assert zoo.SPECS["yolov8_style"].shape(2) == (2, 3, 640, 640)
    assert zoo.SPECS["gpt2_small"].dynamic_axes() == {"input_ids": {0: "batch", 1: "seq"},
                                                      "last_hidden_state": {0: "batch", 1: "seq"}}
    assert zoo.SPECS["vit_b_16"].dynamic_axes() == {"input": {0: "batch"}, "output": {0: "batch"}}
    # The widened zoo: the LLaMA-style decoder prefills 512 tokens at batch 4 and is exported with dynamo.
    assert len(zoo.SPECS) == 17 and zoo.SPECS["llama_decoder"].kiln_shapes(4) == "input_ids:4x512"
    assert zoo.SPECS["googlenet"].kiln_shapes(8) == "input:8x3x224x224"  # Inception blocks (auxiliary streams)
    assert zoo.SPECS["llama_decoder"].exporter == "dynamo" and zoo.SPECS["swin_t"].exporter == "torchscript"
    assert zoo.SPECS["swin_t"].large_batch == 32


def test_export_args():
    a = export_zoo.parse_args(["--models", "resnet50", "--out", "/tmp/x"])
    assert a.models == ["resnet50"] and a.out == "/tmp/x" and a.batch == 1 and not a.no_check
    with pytest.raises(SystemExit):
        export_zoo.parse_args(["--batch", "0"])


def test_run_args_defaults_and_plan():
    a = run_bench.parse_args([])
    assert a.modes == run_bench.ALL_MODES and a.precisions == ["fp32", "fp16"] and a.batches is None
    assert a.iterations == 100 and a.warmup == 20
    p = run_bench.plan(a)
    assert len(p) == len(zoo.SPECS) * 4 * 2 * 2
    assert p[0] == ("resnet50", "kiln", "fp32", 1) and ("bert_base", "eager", "fp16", 32) in p
    assert ("yolov8_style", "max-autotune", "fp32", 64) in p


@pytest.mark.parametrize("argv,modes", [
    (["--skip-torch-compile"], ["eager", "kiln"]),
    (["--skip-kiln"], ["eager", "max-autotune", "reduce-overhead"]),
    (["--only-kiln"], ["kiln"]),
    (["--modes", "eager,reduce-overhead", "--skip-torch-compile"], ["eager"]),
])
def test_run_args_modes(argv, modes):
    assert run_bench.parse_args(argv).modes == modes


@pytest.mark.parametrize("argv", [["--modes", "fast"], ["--precisions", "int4"], ["--batches", "1,x"],
                                  ["--batches", "0"], ["--models", "alexnet"], ["--modes", "kiln", "--skip-kiln"],
                                  ["--kiln-aux-streams", "65"]])
def test_run_args_errors(argv):
    with pytest.raises((SystemExit, ValueError)):
        run_bench.parse_args(argv)


def test_plan_batches_and_order():
    a = run_bench.parse_args(["--models", "gpt2_small", "--batches", "1,8", "--precisions", "fp16",
                              "--modes", "eager,kiln"])
    assert run_bench.plan(a) == [("gpt2_small", "kiln", "fp16", 1), ("gpt2_small", "kiln", "fp16", 8),
                                 ("gpt2_small", "eager", "fp16", 1), ("gpt2_small", "eager", "fp16", 8)]


def test_kiln_commands():
    a = run_bench.parse_args([])
    spec = zoo.SPECS["resnet50"]
    build, bench = run_bench.kiln_commands("k", spec, "m.onnx", "e.engine", "fp16", 1, "tc.json", "b.json", "r.json",
                                           a, transfers=False)
    assert build == ["k", "build", "--onnx=m.onnx", "--saveEngine=e.engine", "--shapes=input:1x3x224x224",
                     "--timingCacheFile=tc.json", "--json=b.json", "--fp16"]
    assert bench == ["k", "bench", "--loadEngine=e.engine", "--shapes=input:1x3x224x224", "--iterations=200",
                     "--duration=3", "--warmUp=500", "--percentile=50,99", "--json=r.json", "--useCudaGraph",
                     "--noDataTransfers"]
    build, bench = run_bench.kiln_commands("k", zoo.SPECS["bert_base"], "m.onnx", "e", "fp32", 32, "tc", "b", "r", a,
                                           transfers=True)
    assert "--fp16" not in build and "--shapes=input_ids:32x128" in build
    assert "--useCudaGraph" in bench and "--noDataTransfers" not in bench  # graphs at every batch, as reduce-overhead
    assert not any(x.startswith("--maxAuxStreams") for x in build)  # off unless asked
    a4 = run_bench.parse_args(["--kiln-aux-streams=4"])
    build, _ = run_bench.kiln_commands("k", zoo.SPECS["googlenet"], "m.onnx", "e", "fp16", 1, "tc", "b", "r", a4,
                                       transfers=False)
    assert build[-1] == "--maxAuxStreams=4"


def test_kiln_fields():
    f = run_bench.kiln_fields(BUILD, run_report(2.0, 480.0), run_report(2.5, 390.0), batch=64)
    assert f["median_ms"] == 2.0 and f["p99_ms"] == 3.0
    assert f["items_per_s"] == pytest.approx(480.0 * 64)
    assert f["build_s"] == 12.5
    assert f["peak_mib"] == pytest.approx(50 + 49)
    assert "approximation" in f["peak_mib_note"]
    e = f["extra"]
    assert e["compute_ms_median"] == pytest.approx(1.96) and e["with_transfers_median_ms"] == 2.5
    assert e["with_transfers_items_per_s"] == pytest.approx(390.0 * 64) and e["tf32"] is True
    assert run_bench.kiln_fields(BUILD, run_report(1.0, 900.0), None, 1)["median_ms"] == 1.0


def test_measure_kiln_missing_binary(tmp_path):
    a = run_bench.parse_args(["--kiln", str(tmp_path / "nokiln"), "--work-dir", str(tmp_path / "w")])
    row = run_bench.measure_kiln(zoo.SPECS["resnet50"], "fp32", 1, a, str(tmp_path / "w"))
    assert row["status"] == "error" and "not found" in row["error"] and row["mode"] == "engine+cudagraph"


def write_fake_kiln(fake):
    """A stand-in kiln that writes the reports kiln writes."""
    fake.write_text(f"""#!{sys.executable}
import json, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[2:] if "=" in a)
build = {BUILD!r}
runs = {{True: {run_report(1.0, 900.0)!r}, False: {run_report(1.2, 800.0)!r}}}
if sys.argv[1] == "build":
    open(args["saveEngine"], "w").write("engine")
    out = build
else:
    assert open(args["loadEngine"]).read() == "engine"
    out = runs["--noDataTransfers" in sys.argv]
json.dump(out, open(args["json"], "w"))
""")
    fake.chmod(0o755)
    models = fake.parent / "models"
    models.mkdir()
    (models / "resnet50.onnx").write_text("onnx")
    return models


def test_measure_kiln_with_fake_binary(tmp_path):
    """The harness builds, benches twice (without and with transfers), and reads kiln's reports."""
    fake = tmp_path / "kiln"
    models = write_fake_kiln(fake)
    a = run_bench.parse_args(["--kiln", str(fake), "--models-dir", str(models), "--work-dir", str(tmp_path / "w")])
    row = run_bench.measure_kiln(zoo.SPECS["resnet50"], "fp16", 1, a, str(tmp_path / "w"))
    assert row["status"] == "ok", row["error"]
    assert row["median_ms"] == 1.0 and row["extra"]["with_transfers_median_ms"] == 1.2
    assert "--timingCacheFile=" + str(tmp_path / "w" / "timing_cache_resnet50.json") in row["extra"]["commands"][0]
    assert (tmp_path / "w" / "resnet50_fp16_b1_run_transfers.json").exists()
    assert not (tmp_path / "w" / "resnet50_fp16_b1.engine").exists()  # deleted after use
    # A failing kiln: the error names the subcommand and what kiln said.
    fake.write_text(f"#!{sys.executable}\nimport sys\nprint('kiln: error: Mod is not supported', file=sys.stderr)\n"
                    "sys.exit(1)\n")
    row = run_bench.measure_kiln(zoo.SPECS["resnet50"], "fp16", 64, a, str(tmp_path / "w"))
    assert row["status"] == "error" and row["error"].startswith("RuntimeError: kiln build exit 1: kiln: error: Mod")


def test_percentile_and_median():
    v = [float(i) for i in range(1, 101)]
    assert run_bench.percentile(v, 99) == 99.0 and run_bench.percentile(v, 50) == 50.0
    assert run_bench.percentile([3.0], 99) == 3.0
    assert run_bench.median([3.0, 1.0, 2.0]) == 2.0 and run_bench.median([1.0, 2.0, 3.0, 4.0]) == 2.5


def test_time_limit():
    import time
    with pytest.raises(TimeoutError):
        with run_bench.time_limit(0.2):
            time.sleep(2)
    with run_bench.time_limit(0):
        pass


def fake_rows():
    r = report.make_row
    return [r("resnet50", "torch", "eager", "fp32", 1, median_ms=4.0, p99_ms=4.5, items_per_s=250.0, peak_mib=120.0),
            r("resnet50", "torch", "max-autotune", "fp32", 1, median_ms=2.0, p99_ms=2.2, items_per_s=500.0,
              build_s=95.0, peak_mib=130.0),
            report.error_row("resnet50", "torch", "reduce-overhead", "fp32", 1, "TimeoutError: timed out after 480 s"),
            r("resnet50", "kiln", "engine+cudagraph", "fp32", 1, median_ms=1.0, p99_ms=1.1, items_per_s=990.0,
              build_s=20.0, peak_mib=150.0, peak_mib_note="approximation"),
            r("resnet50", "kiln", "engine", "fp16", 64, median_ms=10.0, p99_ms=11.0, items_per_s=6400.0),
            r("bert_base", "torch", "eager", "fp16", 32, median_ms=8.0, p99_ms=9.0, items_per_s=4000.0)]


def test_markdown_and_ratios():
    meta = {"card": "NVIDIA H100 80GB HBM3", "torch": "2.11.0", "kiln_commit": "abc1234"}
    md = report.markdown(meta, fake_rows())
    assert "NVIDIA H100 80GB HBM3" in md and "abc1234" in md and "## resnet50" in md and "## bert_base" in md
    assert "| torch.compile reduce-overhead | fp32 | 1 | error | — |" in md
    assert "TimeoutError: timed out after 480 s" in md
    assert "| kiln (CUDA graph) | fp32 | 1 | 1.000 | 1.100 | 990.0 | 20.0 | 150* |" in md
    assert "kiln vs best torch.compile, fp32 batch 1: 2.00x (median 1.000 ms vs 2.000 ms max-autotune); " \
           "throughput 1.98x" in md
    assert "kiln vs best torch.compile, fp16 batch 64: n/a (no torch.compile result)" in md
    assert "fp16 batch 32: n/a (no kiln result)" in md
    # Rows without run fields come from an earlier run; rows of several runs say so.
    assert "- measured in one run: an earlier run (kiln ?)" in md
    rows = fake_rows()
    rows[0].update(kiln_commit="abc1234", measured_at="2026-11-26T10:41:13")
    assert "- measured in several runs: 2026-11-26T10:41:13 (kiln abc1234); an earlier run (kiln ?)" in \
        report.markdown(meta, rows)
    # Rows sorted: fp32 before fp16, batch 1 before 64, torch eager before kiln.
    lines = md.splitlines()
    assert lines.index(next(ln for ln in lines if ln.startswith("| torch eager | fp32"))) < \
        lines.index(next(ln for ln in lines if ln.startswith("| kiln (CUDA graph) | fp32")))


def test_merge_and_json_roundtrip(tmp_path):
    rows = fake_rows()
    newer = report.make_row("resnet50", "torch", "eager", "fp32", 1, median_ms=3.0)
    merged = report.merge_rows(rows, [newer])
    assert len(merged) == len(rows) and merged[-1]["median_ms"] == 3.0
    path = tmp_path / "a" / "results.json"
    report.write_json(str(path), {"card": "X"}, merged)
    meta, back = report.load_results(str(path))
    assert meta == {"card": "X"} and back == json.loads(json.dumps(merged))
    assert report.load_results(str(tmp_path / "none.json")) == ({}, [])


def test_write_all_and_cli(tmp_path, capsys):
    md = report.write_all(str(tmp_path), {"card": "NVIDIA H200"}, fake_rows())
    assert (tmp_path / "results.md").read_text().strip() == md.strip()
    msg = capsys.readouterr().err
    assert "plot.png" in msg  # written, or skipped with a message naming it
    assert report.main([str(tmp_path / "merged"), str(tmp_path / "results.json")]) == 0
    assert (tmp_path / "merged" / "results.json").exists()


def test_slug():
    assert report.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert report.slug("") == "unknown"


def test_kiln_env_adds_bundle_lib(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    (tmp_path / "lib").mkdir()
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/x")
    env = run_bench.kiln_env(str(tmp_path / "bin" / "kiln"))
    parts = env["LD_LIBRARY_PATH"].split(":")
    assert parts[-1] == "/usr/x" and any(os.path.samefile(p, tmp_path / "lib") for p in parts[:-1])


def test_main_end_to_end_without_gpu(tmp_path, capsys):
    """kiln rows through the fake binary; torch rows become errors where there is no torch or GPU."""
    fake = tmp_path / "kiln"
    models = write_fake_kiln(fake)
    argv = ["--kiln", str(fake), "--models-dir", str(models), "--work-dir", str(tmp_path / "w"), "--models",
            "resnet50", "--precisions", "fp16", "--batches", "1", "--results-dir", str(tmp_path / "res")]
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("this test expects a machine without torch")
    assert run_bench.main(argv + ["--modes", "eager,kiln"]) == 0
    out = tmp_path / "res" / "unknown"
    meta, rows = report.load_results(str(out / "results.json"))
    assert [(r["mode"], r["status"]) for r in rows] == [("engine+cudagraph", "ok"), ("eager", "error")]
    assert meta["card"] == "unknown" and "kiln_commit" in meta
    assert all(r["kiln_commit"] == meta["kiln_commit"] and r["measured_at"] == meta["date"] for r in rows)
    assert "| kiln (CUDA graph) | fp16 | 1 | 1.000 |" in (out / "results.md").read_text()
    # A second run merges: the kiln row is replaced, the eager row kept.
    assert run_bench.main(argv + ["--only-kiln"]) == 0
    _, rows2 = report.load_results(str(out / "results.json"))
    assert sorted(r["mode"] for r in rows2) == ["eager", "engine+cudagraph"]
    assert "kiln vs best torch.compile" in capsys.readouterr().out


def test_rebuild_check_compare():
    import rebuild_check

    def build(t, tuning, hits=0):
        return {"performance": {"build_time_s": t, "phases_s": [{"phase": "tactics", "s": tuning}]},
                "optimization": {"tuning_time_s": tuning, "timing_cache_hits": hits}}

    layers = {"layers": [{"name": "conv1", "tactic": "cudnn:eng=1"}, {"name": "fc", "tactic": "cublaslt:ab"}]}
    other = {"layers": [{"name": "conv1", "tactic": "cudnn:eng=2"}, {"name": "fc", "tactic": "cublaslt:ab"}]}
    r = rebuild_check.compare({"build": build(10.0, 9.0), "inspect": layers},
                              {"build": build(1.0, 0.001, hits=2), "inspect": layers})
    assert r["ratio"] == 0.1 and r["same_tactics"] and r["layers"] == 2 and r["rebuild_cache_hits"] == 2
    assert r["cold_phases"] == {"tactics": 9.0} and r["differing"] == []
    r = rebuild_check.compare({"build": build(10.0, 9.0), "inspect": layers}, {"build": build(1.0, 0), "inspect": other})
    assert not r["same_tactics"] and r["differing"] == [[["conv1", "cudnn:eng=1"], ["conv1", "cudnn:eng=2"]]]
    # No layers is not "the same tactics".
    assert not rebuild_check.compare({"build": build(1.0, 0), "inspect": {}}, {"build": build(1.0, 0), "inspect": {}})[
        "same_tactics"]


def test_profile_layers_summarize():
    import profile_layers

    profile = [{"name": "a", "averageMs": 0.5, "percentage": 50.0}, {"name": "b", "averageMs": 0.3, "percentage": 30.0},
               {"name": "c", "averageMs": 0.2, "percentage": 20.0}]
    info = {"layers": [{"name": "a", "op_type": "kiln.FusedConv", "precision": "float16", "tactic": "cudnn:1"},
                       {"name": "b", "op_type": "Gather", "precision": "float16", "tactic": "default"},
                       {"name": "c", "op_type": "kiln.FusedConv", "precision": "float16", "tactic": "cudnn:2"}]}
    types, slow, total = profile_layers.summarize(profile, info, top=2)
    assert abs(total - 1.0) < 1e-12
    assert [(op, ms) for op, _, ms in types] == [("kiln.FusedConv", 0.7), ("Gather", 0.3)]
    assert [s[5] for s in slow] == ["a", "b"] and slow[0][4] == "cudnn:1"


def test_utilization_against_the_cards_floors():
    floors = {"fp16_tflops": 800.0, "bandwidth_gbs": 4000.0}
    row = report.make_row("resnet50", "kiln", "engine", "fp16", 64, median_ms=2.0, p99_ms=2.1, items_per_s=32000.0,
                          build_s=10.0, peak_mib=100.0)
    row.update(flops=8.0e11, min_bytes=4.0e8)  # 0.8 TFLOP and 400 MB in 2 ms: 400 TFLOP/s, 200 GB/s
    compute, memory = report.utilization(row, floors)
    assert abs(compute - 0.5) < 1e-12 and abs(memory - 0.05) < 1e-12
    assert report.utilization(row, None) == (None, None)
    assert report.utilization(dict(row, status="error"), floors) == (None, None)
    assert report.utilization(dict(row, flops=None), floors)[0] is None
    md = report.markdown({"card": "X", "floors": floors}, [row])
    assert "| 50.0% | 5.0% |" in md and "800 TFLOP/s" in md and "4,000 GB/s" in md
    assert "work at batch 64 (fp16): 800.0 GFLOP, least memory traffic 381.5 MiB" in md
    assert "| — | — |" in report.markdown({"card": "X"}, [row])  # no floors measured: no fractions


def test_dynamic_shapes_profiles_and_shapes():
    import dynamic_shapes

    (lo, opt, hi), timed = dynamic_shapes.profile_for(zoo.SPECS["resnet50"])
    assert (lo, opt, hi) == ((1,), (32,), (64,)) and (8,) in timed
    assert dynamic_shapes.shape_arg(zoo.SPECS["resnet50"], (8,)) == "input:8x3x224x224"
    (lo, opt, hi), timed = dynamic_shapes.profile_for(zoo.SPECS["bert_base"])
    assert opt == (16, 128) and (16, 77) in timed
    assert dynamic_shapes.shape_arg(zoo.SPECS["bert_base"], (16, 77)) == "input_ids:16x77"
    assert dynamic_shapes.profile_for(zoo.SPECS["llama_decoder"])[0][2] == (4, 512)
