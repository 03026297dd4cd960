"""The GPU check (issue 52), one run on a CUDA machine, under 8 minutes: what the CPU suite cannot test.

    python tools/gpu_check.py --out DIR [--budget-s 450] [--rehearse]

Steps, each on its own (one that fails is written down and the next runs; one that would overrun the budget
is skipped and said so):
1. the machine: card, CUDA, torch, transformers;
2. CUDA's int4 kernel (``engine.lowbit``): its product against the same weights de-quantised, and which
   kernel ``choose`` takes, in its own words;
3. exactness: greedy output of every lossless method identical to ``ar``'s, graphs on and graphs off, on a
   random model of the default's shape (float32) and, where the default's GGUF is here, on the default;
4. sampling: Pearson's χ² of the first token of ``speculative`` and ``quantized`` against the target's own
   distribution (``explorer.audit.sampling_audit``), on CUDA;
5. T(n)/T(1): graphs off, on with plain products, on with the split products the card chose (``engine.costs``,
   ``engine.split_products``);
6. the benchmark (``explorer.bench``) of HF ``generate``, our ``ar`` and the lossless methods, graphs on
   (the default model where it is here, else the random one), then a shorter one with graphs off.
It writes ``DIR/gpu-check.json`` (everything) and ``DIR/gpu-check.md`` (the tables), and prints the summary.

``--rehearse`` runs the same steps on the CPU with small sizes: what the script does before a GPU lends it
minutes (the device steps then say they did not apply).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import explorer  # noqa: E402
from explorer.engine import cuda_graphs, lowbit, split_products  # noqa: E402

LOSSLESS = (  # method, draft: every lossless method the random model can run (trained drafts need the default)
    ("speculative", "prompt-lookup:3"), ("speculative", "early-exit:4"), ("quantized", "int4"),
    ("quantized", "int8"), ("suffix", None), ("lookahead", None), ("bita", None),
    ("hierarchical", "prompt-lookup:3>int4"),
)
TRAINED = (("eesd", None), ("eagle", None), ("eagle-tree", None))  # the default's shipped drafts, where present
PROMPTS = ("Why is the sky blue? Answer in a short paragraph.",
           "Write a Python function that returns the n-th Fibonacci number.",
           "List three facts about the Moon.")
BENCH_SYSTEMS = ("hf-generate", "ar", "speculative:prompt-lookup:3", "quantized", "quantized:alone", "suffix",
                 "bita", "lookahead", "hierarchical:prompt-lookup:3>int4")


class Budget:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def graphs(on: bool) -> None:
    os.environ["EXPLORER_CUDA_GRAPHS"] = "1" if on else "0"


def machine(device: str) -> dict:
    import transformers

    info = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "device": device}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info |= {"card": torch.cuda.get_device_name(0), "cuda": torch.version.cuda,
                 "memory_gb": round(props.total_memory / 2**30, 1), "sms": props.multi_processor_count}
    return info


def int4_kernel(device: str) -> dict:
    """CUDA's int4 product against the de-quantised weights, at the copy's shapes, and ``choose``'s pick."""
    out = {}
    for o, i in ((960, 576), (3072, 576), (576, 1536), (49152, 576)):
        w = torch.randn(o, i, device=device) * i ** -0.5
        blocks = lowbit.Int4Blocks.rounded(w)
        x = torch.randn(3, i, device=device).bfloat16()
        ref = x.float() @ blocks.dense().T
        packed = lowbit.LowBitLinear("int4", lowbit.pack_int4(blocks, torch.bfloat16), o, i, None, torch.bfloat16, "")
        got = packed(x).float()
        out[f"{o}x{i}"] = {"relative_error": float((got - ref).norm() / ref.norm())}
    out["choice"] = lowbit.choose("int4", torch.device(device), torch.bfloat16, 960, 576)[1]
    out["choice_int8"] = lowbit.choose("int8", torch.device(device), torch.bfloat16, 960, 576)[1]
    return out


def random_default_shape(device: str, tokenizer: str | None, layers: int = 30):
    """A randomly initialised Llama of SmolLM2-135M's shape (its weights cannot travel: 64 MiB a call), float32,
    with the default's own tokenizer where its folder is given (3.5 MB: the benchmark's prompts are text), else
    none. Init scale 0.05 (the default's config says 0.02): peaked enough that a greedy step is rarely a
    near-tie."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=layers,
                         num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                         rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, initializer_range=0.05,
                         bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    tok = AutoTokenizer.from_pretrained(tokenizer) if tokenizer else None
    return explorer.load(model, device=device, dtype="float32", tokenizer=tok)


def prompt_ids(model) -> list[list[int]]:
    if model.tokenizer is not None:
        return [model.encode(p) for p in PROMPTS]
    return [[(7 * k + 3 * j) % 1000 + 10 for j in range(24 + 8 * k)] for k in range(len(PROMPTS))]


def exactness(model, systems, budget: Budget, tokens: int, prompts: int | None = None) -> list[dict]:
    """Greedy output of each system against ``ar``'s, per prompt with graphs on, on the first prompt with them
    off (the eager path is the one the CPU suite already proves)."""
    rows = []
    for on in (True, False):
        graphs(on)
        for k, ids in enumerate(prompt_ids(model)[:prompts if on else 1]):
            ar = explorer.decode(model, prompt_ids=ids, method="ar", max_new_tokens=tokens, temperature=0.0)
            for method, draft in systems:
                if budget.left() < 20:
                    rows.append({"graphs": on, "method": method, "draft": draft, "skipped": "out of time"})
                    continue
                row = {"graphs": on, "prompt": k, "method": method, "draft": draft}
                try:
                    trace = explorer.decode(model, prompt_ids=ids, method=method, draft=draft, max_new_tokens=tokens,
                                            temperature=0.0)
                    got, want = list(trace.output_ids), list(ar.output_ids)
                    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
                    row |= {"identical": got == want, "first_difference": first,
                            "tokens_per_target_forward": trace.summary.tokens_per_target_forward}
                except Exception as err:  # noqa: BLE001 — written down; the next system runs
                    row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
                rows.append(row)
    graphs(True)
    return rows


def sampling(device: str, runs: int) -> list[dict]:
    """χ² of the first token against the target's distribution, on a small-vocabulary model (the test's power)."""
    from explorer.audit import sampling_audit

    target = explorer.load("tiny-random:1", device=device)
    out = []
    for method, draft in (("speculative", "model:tiny-random:2:1"), ("quantized", "int4"), ("quantized", "int8")):
        audit = sampling_audit(target, "the cat", runs=runs, temperature=1.0, method=method, draft=draft,
                               device=device)
        out.append({"method": method, "draft": draft, "runs": audit.runs, "chi2": audit.chi2, "dof": audit.dof,
                    "p_value": audit.p_value, "paths": audit.paths})
    return out


def cost_curves(model, max_tokens: int) -> dict:
    """T(n) for n = 1 … max_tokens: graphs off, graphs on with plain products, graphs on with the products' split
    measured per row count (``engine.split_products``, what decoding runs); fresh curves each (the cache is per
    model and process), and the splits chosen."""
    from explorer.engine import costs

    out = {}
    for name, on, forced in (("off", False, None), ("on, plain products", True, 1), ("on", True, None)):
        graphs(on)
        split_products.FORCED = forced
        costs._CURVES.pop(model.model, None)
        costs.verify_cost_curve(model, max_tokens)
        curve = costs.raw_cost_curve(model, max_tokens=max_tokens)
        out[name] = {"T_ms": [round(t * 1e3, 3) for t in curve], "ratio": [round(t / curve[0], 3) for t in curve]}
    graphs(True)
    split_products.FORCED = None
    costs._CURVES.pop(model.model, None)
    out["splits chosen"] = split_products.choices()
    return out


def bench(model_spec, systems, repeats: int, tokens: int, prompts: int, device: str, dtype: str) -> dict:
    from explorer import bench as bench_module

    chosen = bench_module.load_prompts()[:prompts]
    report = bench_module.run(model_spec, systems, repeats=repeats, max_new_tokens=tokens, device=device, dtype=dtype,
                              prompts=chosen, progress=lambda done, total, line: print(line, flush=True))
    report["meta"]["model"] = model_spec if isinstance(model_spec, str) else "random weights of the default's shape"
    report["meta"]["cuda_graphs"] = os.environ.get("EXPLORER_CUDA_GRAPHS", "1")
    report["meta"]["graphs_status"] = cuda_graphs.status()
    return report


def step(report: dict, name: str, budget: Budget, need_s: float, fn):
    """Run ``fn`` unless less than ``need_s`` is left; its result, or its error, into ``report``."""
    if name in report["skip"]:
        return None
    if budget.left() < need_s:
        report["steps"][name] = {"skipped": f"{budget.left():.0f} s left, it needs ≈ {need_s:.0f}"}
        print(f"== {name}: skipped (out of time)", flush=True)
        return None
    print(f"== {name} ({budget.left():.0f} s left)", flush=True)
    started = time.monotonic()
    try:
        value = fn()
        report["steps"][name] = {"seconds": round(time.monotonic() - started, 1), "result": value}
        return value
    except Exception as err:  # noqa: BLE001 — written down; the next step runs
        report["steps"][name] = {"seconds": round(time.monotonic() - started, 1),
                                 "error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}",
                                 "traceback": traceback.format_exc()[-3000:]}
        print(f"   failed: {report['steps'][name]['error']}", flush=True)
        return None


def default_model(device: str):
    from explorer.models.default import local_default_gguf

    cached = (Path(os.environ.get("EXPLORER_CACHE", "~/.cache/spec-explorer")).expanduser()
              / "SmolLM2-135M-Instruct-f32" / "config.json")
    if local_default_gguf() is None and not cached.is_file():
        return None
    return explorer.load("default", device=device, dtype="float32")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget-s", type=float, default=450.0)
    parser.add_argument("--rehearse", action="store_true", help="the CPU rehearsal: small sizes, no device steps")
    parser.add_argument("--tokenizer", help="the default's tokenizer folder, for the random model's text prompts")
    parser.add_argument("--smoke", action="store_true", help="a minute's check that the device path runs at all: the "
                        "kernel, two methods on one prompt with graphs, T(n) for n ≤ 4")
    parser.add_argument("--systems", default=",".join(BENCH_SYSTEMS), help="the benchmark's systems, comma-separated")
    parser.add_argument("--skip", default="", help="comma-separated step names to leave out (a rehearsal of the rest)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.rehearse else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU here: run with --rehearse on a CPU", file=sys.stderr)
        return 2
    budget = Budget(args.budget_s)
    small = args.rehearse
    tokens = 16 if small else 32
    report = {"steps": {}, "rehearsal": small, "skip": [n.strip() for n in args.skip.split(",") if n.strip()]}
    step(report, "machine", budget, 0, lambda: machine(device))
    step(report, "int4 kernel", budget, 10, lambda: int4_kernel(device))
    rand = step(report, "load the random model", budget, 10, lambda: random_default_shape(device, args.tokenizer, 4 if small else 30))
    if rand is not None and args.smoke:
        smoke = (("speculative", "prompt-lookup:3"), ("quantized", "int4"))
        step(report, "exactness (random weights)", budget, 5, lambda: exactness(rand, smoke, budget, 16, prompts=1))
        step(report, "T(n)/T(1)", budget, 5, lambda: cost_curves(rand, 4))
        return finish(report, out)
    if rand is not None:
        step(report, "exactness (random weights)", budget, 60, lambda: exactness(rand, LOSSLESS, budget, tokens))
    default = step(report, "load the default", budget, 60, lambda: default_model(device))
    if default is not None:
        step(report, "exactness (the default)", budget, 60,
             lambda: exactness(default, LOSSLESS + TRAINED, budget, tokens))
    step(report, "sampling χ²", budget, 30, lambda: sampling(device, 100 if small else 400))
    measured = default or rand
    if measured is not None:
        step(report, "T(n)/T(1)", budget, 20, lambda: cost_curves(measured, 4 if small else cuda_graphs.MAX_ROWS))
        spec = "default" if default is not None else measured
        if default is None and measured.tokenizer is None:
            report["steps"]["bench"] = {"skipped": "the random model has no tokenizer (pass --tokenizer)"}
            spec = None
        graphs(True)
        step(report, "bench (graphs on)", budget, 90 if spec is not None else 1e9, lambda: bench(
            spec, tuple(args.systems.split(",")), 1 if small else 2, 16 if small else 48, 2 if small else 10, device, "float32"))
        graphs(False)
        step(report, "bench (graphs off)", budget, 90 if spec is not None else 1e9, lambda: bench(
            spec, ("hf-generate", "ar", "speculative:prompt-lookup:3", "quantized"), 1, 16 if small else 48,
            2 if small else 4, device, "float32"))
        graphs(True)
    return finish(report, out)


def finish(report: dict, out: Path) -> int:
    report["graphs_status"] = cuda_graphs.status()
    (out / "gpu-check.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "gpu-check.md").write_text(summary(report))
    print(summary(report))
    return 0


def summary(report: dict) -> str:
    """The tables a person reads: exactness per method, χ², T(n)/T(1), the benches."""
    from explorer import bench as bench_module

    lines = ["# GPU check", "", f"machine: {json.dumps(report['steps'].get('machine', {}).get('result'))}", ""]
    for name, entry in report["steps"].items():
        if "error" in entry or "skipped" in entry:
            lines.append(f"- **{name}**: {entry.get('error') or entry.get('skipped')}")
    kernel = report["steps"].get("int4 kernel", {}).get("result")
    if kernel:
        lines += ["## int4 kernel", ""] + [f"- {k}: {v}" for k, v in kernel.items()]
    for name in ("exactness (random weights)", "exactness (the default)"):
        rows = report["steps"].get(name, {}).get("result") or []
        if rows:
            lines += ["", f"## {name}", "", "| graphs | method | draft | identical to ar | tok/target fwd | note |",
                      "|---|---|---|---|---|---|"]
            for r in rows:
                note = r.get("error") or r.get("skipped") or (f"first difference at {r['first_difference']}"
                                                             if r.get("first_difference") is not None else "")
                lines.append(f"| {'on' if r['graphs'] else 'off'} | {r['method']} | {r.get('draft') or ''} | "
                             f"{r.get('identical', '–')} | {r.get('tokens_per_target_forward') or '–'} | {note} |")
    chi = report["steps"].get("sampling χ²", {}).get("result") or []
    if chi:
        lines += ["", "## sampling χ²", ""] + [f"- {c['method']} {c['draft']}: {c['runs']} runs, χ² {c['chi2']:.2f} "
                                               f"on {c['dof']} dof, p = {c['p_value']:.3f}" for c in chi]
    curves = report["steps"].get("T(n)/T(1)", {}).get("result")
    if curves:
        lines += ["", "## T(n)/T(1)", ""] + [f"- graphs {k}: T(1) {v['T_ms'][0]} ms; ratios {v['ratio']}"
                                             for k, v in curves.items() if k != "splits chosen"]
        lines += ["", "splits chosen (rows × out × in: chunks): " + ", ".join(
            f"{c['rows']}×{c['out']}×{c['in']}: {c['splits']}" for c in curves.get("splits chosen", []))]
    for name in ("bench (graphs on)", "bench (graphs off)"):
        result = report["steps"].get(name, {}).get("result")
        if result:
            lines += ["", f"## {name}", "", bench_module.markdown(result), "",
                      f"graphs: {result['meta'].get('graphs_status')}"]
    lines += ["", f"CUDA graphs in all: {report.get('graphs_status')}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
