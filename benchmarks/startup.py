"""Start-up: how long one sentence takes through ``attnkit predict``, whole processes, beside
``python -c "import torch"`` on the same machine (issue 42: at most torch's import + 0.5 s).

    python benchmarks/startup.py                     # the tiny fixture classifier
    python benchmarks/startup.py --run runs/nsmc-quick --repeats 9
    python benchmarks/startup.py --avx2              # PyTorch held to its AVX2 kernels
    python benchmarks/startup.py --name startup-xeon # another machine's record beside

attnkit's modules are byte-compiled first, as an installed package's are. The two
commands alternate (torch, predict, torch, predict, ...) so that a machine getting
busier slows both; each figure is the median wall time of ``--repeats`` processes. The
record also lists which heavy modules the predict process imported (none of torch._dynamo,
sympy, matplotlib, transformers, fastapi, onnxruntime should be there) and the CPU. Writes
benchmarks/results/startup[-avx2].json (or ``--name``.json) and rebuilds docs/results.md.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import AVX2, RESULTS, ROOT, machine, write_results_md  # noqa: E402
from speed_runners import cpu_info  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "legacy_runs" / "classify-transformer"
TEXT = "배우들 연기가 정말 최고였어요"
HEAVY = ("torch._dynamo", "sympy", "matplotlib", "transformers", "fastapi", "onnxruntime")


def _byte_compile() -> None:
    """attnkit's modules compiled to bytecode (__pycache__), as ``pip install`` leaves an
    installed package and torch's files here: a checkout run with PYTHONDONTWRITEBYTECODE=1
    would otherwise compile every module in every process (0.45 s of 0.6 on a slow host)."""
    import attnkit

    compileall.compile_dir(Path(attnkit.__file__).parent, quiet=1)


def _time(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def _imported(run: Path, env: dict[str, str]) -> list[str]:
    script = (
        "import json, sys\n"
        "from attnkit.app.cli import main\n"
        f"main(['predict', {str(run)!r}, {TEXT!r}])\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], check=True, env=env,
                          capture_output=True, text=True)  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=FIXTURE, help="a classify run (default: fixture)")
    ap.add_argument("--repeats", type=int, default=7, help="processes per command (median)")
    ap.add_argument("--avx2", action="store_true", help="PyTorch held to its AVX2 kernels")
    ap.add_argument("--json", type=Path, help="write the record here (results/ untouched)")
    ap.add_argument("--name", help="the record's name (default: startup[-avx2])")
    args = ap.parse_args(argv)
    env = {**os.environ, **(AVX2 if args.avx2 else {})}
    attnkit_cli = [sys.executable, "-m", "attnkit", "predict", str(args.run), TEXT]
    torch_only = [sys.executable, "-c", "import torch"]
    _byte_compile()
    _time(torch_only, env)  # warm the file cache for both
    _time(attnkit_cli, env)
    torch_s, predict_s = [], []
    for _ in range(args.repeats):
        torch_s.append(_time(torch_only, env))
        predict_s.append(_time(attnkit_cli, env))
    torch_med, predict_med = statistics.median(torch_s), statistics.median(predict_s)
    name = args.name or ("startup-avx2" if args.avx2 else "startup")
    record = {
        "name": name,
        "kind": "startup",
        "command": "python benchmarks/startup.py"
        + (" --avx2" if args.avx2 else "")
        + (f" --run {args.run}" if args.run != FIXTURE else "")
        + (f" --repeats {args.repeats}" if args.repeats != 7 else "")
        + (f" --name {args.name}" if args.name else ""),
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{cpu_info()['model']}; {machine()}",
        "kernels": "avx2" if args.avx2 else "default",
        "run": str(args.run.relative_to(ROOT) if args.run.is_relative_to(ROOT) else args.run),
        "repeats": args.repeats,
        "import_torch_s": round(torch_med, 3),
        "predict_s": round(predict_med, 3),
        "over_torch_s": round(predict_med - torch_med, 3),
        "heavy_imports": _imported(args.run, env),
    }
    text = json.dumps(record, indent=2) + "\n"
    if args.json is not None:
        args.json.write_text(text, encoding="utf-8")
    else:
        (RESULTS / f"{name}.json").write_text(text, encoding="utf-8")
        write_results_md()
    print(json.dumps(record, indent=2))
    return record


if __name__ == "__main__":
    main()
