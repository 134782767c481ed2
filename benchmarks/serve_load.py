"""Load test of ``attnkit serve`` on loopback: a bounded number of requests at a fixed
concurrency, then it stops. Records errors, latency percentiles, throughput and the server
process's memory before and after -> benchmarks/results/NAME.json (kind "serve") and the
"Serving" table of docs/results.md.

    python benchmarks/serve_load.py                       # 2,000 requests, 16 concurrent
    python benchmarks/serve_load.py --run runs/nsmc-transformer --requests 5000
    python benchmarks/serve_load.py --batch-size 1 --name serve-load-unbatched
    python benchmarks/serve_load.py --concurrency 1 --name serve-load-1-client
    python benchmarks/serve_load.py --avx2 --name serve-load-avx2  # a laptop's kernels

``--endpoint generate`` loads /v1/generate instead: each request continues the first
``--prompt-chars`` characters (16) of one line of Tiny Shakespeare by ``--new-tokens``
tokens (48: prompt and continuation fit the served model's 64-token context, so no step
recomputes a slid window), sampled with its own seed (the request's number), so every
request does the same work alone and batched; the record adds the tokens generated per
second.

    python benchmarks/serve_load.py --endpoint generate --requests 320 --pairs 3 \
        --client raw --name serve-load-generate   # and serve-load-generate-unbatched

``--pairs N`` measures the server and one with ``--batch-size 1`` in N alternating rounds
(a host whose speed drifts charges both alike) and records each with its rounds and their
medians. With ``--against-src PATH`` the second server is the same one run from another
attnkit source tree (PATH: a revision's src/, e.g. in a git worktree), recorded as
NAME-before. ``--vary-tokens``: request i asks for ``--new-tokens`` x (1 + (5 i mod 8)) / 8
tokens (6 to 48 by default), as a server's mixed traffic: a batch's rows end at different
tokens, where continuous batching lets waiting requests in.

    python benchmarks/serve_load.py --endpoint generate --requests 320 --pairs 3 \
        --client raw --vary-tokens --against-src /tmp/attnkit-before/src \
        --name serve-load-generate-varied   # and serve-load-generate-varied-before

``--rate R`` (with ``--client raw``) is an open loop instead of N clients that each wait
for their answer: requests arrive at R a second (Poisson arrivals, seeded), each sent on
one of ``--concurrency`` connections, and its latency counts from its arrival. A closed
loop measures capacity (requests/s); an open loop at a rate below it, the wait a request
arriving at a random moment sees (behind a running batch, say).

The served run: ``--run RUN``, else runs/bench-serve-nsmc-quick (for generate:
runs/bench-serve-shakespeare, nanoGPT's CPU-sized character GPT), trained first from
configs/nsmc-quick.yaml (configs/shakespeare-nanogpt-cpu.yaml) when missing (a few
minutes). Each request classifies one NSMC
test review (``--texts N`` per request for batched requests), drawn in a fixed order; the
server runs as its own process (``attnkit serve``), exactly as a user starts it, with
``--batch-size`` / ``--batch-wait-ms`` (its micro-batching; ``--batch-size 1``: off),
``--precision`` and ``--threads`` passed on; ``--avx2`` starts it with PyTorch held to its
AVX2 kernels (and fp32). The record says the CPU (its model name, and whether /proc/cpuinfo
has avx512_bf16), the kernels and the precision the server computes in.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from report import AVX2, ROOT, command_line, cpu_native_bf16, machine, publish

DEFAULT_RUN = ROOT / "runs" / "bench-serve-nsmc-quick"
DEFAULT_LM_RUN = ROOT / "runs" / "bench-serve-shakespeare"
RECIPES = {DEFAULT_RUN: "nsmc-quick", DEFAULT_LM_RUN: "shakespeare-nanogpt-cpu"}
FALLBACK_TEXTS = [
    "배우들 연기가 정말 최고였어요",
    "시간 낭비, 돈 낭비",
    "그럭저럭 볼만했다",
    "스토리가 너무 지루해서 졸았다",
    "인생 영화입니다 꼭 보세요",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mb(pid: int) -> float:
    """Resident memory of a process (Linux /proc), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmRSS for process {pid}")


def _cpu() -> dict:
    """The CPU's model name (as lscpu says it) and whether /proc/cpuinfo lists avx512_bf16."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    name, flags = "unknown", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and name == "unknown":
            name = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    return {"cpu": name, "avx512_bf16": "avx512_bf16" in flags}


def _precision(precision: str, env: dict[str, str]) -> str:
    """What the server computes in for ``--precision`` on the CPU (attnkit.load's rule) in
    the server's environment ``env`` (``ATTNKIT_CPU_BF16`` may say there is no native bf16)."""
    from attnkit.runtime.device import resolve_precision

    bf16 = {"auto": "auto", "fp32": False, "bf16": True}[precision]
    saved = os.environ.get("ATTNKIT_CPU_BF16")
    os.environ["ATTNKIT_CPU_BF16"] = env.get("ATTNKIT_CPU_BF16", "")
    try:
        return resolve_precision(bf16, torch.device("cpu"), what="precision").name
    finally:
        if saved is None:
            del os.environ["ATTNKIT_CPU_BF16"]
        else:
            os.environ["ATTNKIT_CPU_BF16"] = saved


def _served(info: dict, precision: str, cpu: dict, threads: int, avx2: bool = False) -> str:
    """The table's model cell: the model, and how and where it was served."""
    bf16 = "avx512_bf16" if cpu["avx512_bf16"] else "no avx512_bf16"
    kernels = ", PyTorch held to AVX2 kernels" if avx2 else ""
    return (
        f"{info['arch']} ({info['task']}, {info['dataset']}), {info['parameters']:,} parameters;"
        f" {precision}, {threads} threads, {cpu['cpu']} ({bf16}){kernels}"
    )


def _texts(n: int) -> tuple[list[str], str]:
    """n review texts: NSMC's test reviews if the data is here, else a few fixed ones."""
    try:
        from attnkit.data.readers import read_nsmc

        texts = [e.text for e in read_nsmc("test") if e.text.strip()]
        source = "NSMC test reviews"
    except Exception:  # noqa: BLE001 - no data here: the load test still runs
        texts, source = FALLBACK_TEXTS, "5 fixed Korean reviews (NSMC not found)"
    return [texts[i % len(texts)] for i in range(n)], source


def _prompts(n: int, chars: int = 16) -> tuple[list[str], str]:
    """n prompts: the first ``chars`` characters of the non-empty lines of Tiny Shakespeare's
    last 10% (its validation part), if the data is here, else a few fixed ones."""
    try:
        from attnkit.data.paths import resolve_data_dir

        text = (resolve_data_dir() / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
        lines = [x[:chars] for x in text[int(len(text) * 0.9) :].splitlines() if x.strip()]
        source = f"the first {chars} characters of lines of Tiny Shakespeare's validation part"
    except Exception:  # noqa: BLE001 - no data here: the load test still runs
        fixed = ["ROMEO:", "First Citizen:", "KING RICHARD III:"]
        lines, source = [x[:chars] for x in fixed], "3 fixed prompts"
    return [lines[i % len(lines)] for i in range(n)], source


def _ensure_run(run: Path) -> None:
    if (run / "model.safetensors").is_file():
        return
    if run not in RECIPES:
        raise SystemExit(f"no trained run at {run}")
    from attnkit.app.api import train

    recipe = ROOT / "configs" / f"{RECIPES[run]}.yaml"
    print(f"training {run} from {recipe.relative_to(ROOT)} (the served model)")
    train(recipe, out=run, force=True, overrides=["training.progress=false"])


def _answered(body: dict, answer: dict) -> int | None:
    """The texts classified / tokens generated by an answer to ``body``; None: not an answer
    to it."""
    if "texts" in body:
        n = len(answer.get("predictions", ()))
        return n if n == len(body["texts"]) else None
    tokens = answer.get("tokens")
    return tokens if isinstance(tokens, int) and isinstance(answer.get("text"), str) else None


Load = tuple[list[float], list[str], int]  # latencies (s), errors, tokens generated


async def _load(url: str, path: str, bodies: list[dict], concurrency: int) -> Load:
    """Send every body (POST ``path``) with ``concurrency`` workers; per request its
    latency (s), a description of each error, and the tokens generated in all."""
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    tokens = 0
    queue: asyncio.Queue = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def worker() -> None:
            nonlocal tokens
            while not queue.empty():
                body = queue.get_nowait()
                start = time.perf_counter()
                try:
                    r = await client.post(path, json=body)
                    done = _answered(body, r.json()) if r.status_code == 200 else None
                    if done is None:
                        errors.append(f"HTTP {r.status_code}: {r.text[:200]}")
                    elif "prompt" in body:
                        tokens += done
                except Exception as exc:  # noqa: BLE001 - counted as an error
                    errors.append(f"{type(exc).__name__}: {exc}")
                latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, errors, tokens


def _arrivals(n: int, rate: float, seed: int = 0) -> list[float]:
    """n arrival times (s from the start) of a Poisson process of ``rate`` requests/s."""
    import random

    draw = random.Random(seed)
    times, t = [], 0.0
    for _ in range(n):
        times.append(t)
        t += draw.expovariate(rate)
    return times


async def _load_raw(
    url: str, path: str, bodies: list[dict], concurrency: int, rate: float | None = None
) -> Load:
    """``_load`` with a client of a few lines: one kept-alive HTTP/1.1 connection per worker
    (asyncio streams), ~0.1 ms of CPU a request where httpx takes ~1.5 ms. On a machine of
    few cores the client shares them with the server; this one leaves them to the server.
    ``rate``: open loop, request i is due at a Poisson arrival time (``_arrivals``) and its
    latency counts from then (waiting for a free connection included)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    latencies: list[float] = []
    errors: list[str] = []
    tokens = 0
    due = _arrivals(len(bodies), rate) if rate else [0.0] * len(bodies)
    pending = iter(zip(bodies, due, strict=True))
    t0 = time.perf_counter()

    async def worker() -> None:
        nonlocal tokens
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            for body, at in pending:
                data = json.dumps(body, ensure_ascii=False).encode()
                head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: "
                        f"application/json\r\nContent-Length: {len(data)}\r\n\r\n")  # fmt: skip
                if rate:
                    await asyncio.sleep(max(0.0, t0 + at - time.perf_counter()))
                start = t0 + at if rate else time.perf_counter()
                try:
                    writer.write(head.encode() + data)
                    lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                    fields = dict(x.lower().split(": ", 1) for x in lines[1:] if ": " in x)
                    answer = await reader.readexactly(int(fields["content-length"]))
                    ok = lines[0].startswith("HTTP/1.1 200")
                    done = _answered(body, json.loads(answer)) if ok else None
                    if done is None:
                        errors.append(f"{lines[0]}: {answer[:200]!r}")
                    elif "prompt" in body:
                        tokens += done
                except Exception as exc:  # noqa: BLE001 - counted as an error
                    errors.append(f"{type(exc).__name__}: {exc}")
                    return
                finally:
                    latencies.append(time.perf_counter() - start)
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, errors, tokens


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def _revision(src: Path) -> str:
    """The git revision of the source tree ``src`` (a worktree's src/), or "unknown"."""
    done = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def _new_tokens(args: argparse.Namespace, i: int) -> int:
    """Request i's max_new_tokens: ``--new-tokens``, or a fixed spread of it (--vary-tokens)."""
    if not args.vary_tokens:
        return args.new_tokens
    return max(1, round(args.new_tokens * (1 + (5 * i) % 8) / 8))


def _start(args: argparse.Namespace, run: Path, env: dict, batch_size: int | None):
    """``attnkit serve RUN`` in its own process (``batch_size``: its --batch-size, None: its
    default), ready (its /healthz answers): (the process, its URL)."""
    import httpx

    names = ("batch_wait_ms", "threads")
    passed = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    if batch_size is not None:
        passed["batch_size"] = batch_size
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attnkit.app.cli",
            "serve",
            str(run),
            "--port",
            str(port),
            "--max-texts",
            str(max(64, args.texts)),
            "--precision",
            args.precision,
            *[f"--{name.replace('_', '-')}={value}" for name, value in passed.items()],
        ],  # fmt: skip
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return server, url
        except httpx.HTTPError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.terminate()
            raise SystemExit("the server did not start")
        time.sleep(0.3)


def _measure(args: argparse.Namespace, url: str, path: str, bodies: list[dict]) -> dict:
    """One load: every body sent at the chosen concurrency; its figures."""
    start = time.perf_counter()
    if args.rate:
        run = _load_raw(url, path, bodies, args.concurrency, args.rate)
    else:
        run = (_load if args.client == "httpx" else _load_raw)(url, path, bodies, args.concurrency)
    latencies, errors, tokens = asyncio.run(run)
    wall = time.perf_counter() - start
    ms = [x * 1000 for x in latencies]
    return {
        "errors": len(errors),
        "first_errors": errors[:5],
        "wall_s": round(wall, 2),
        "requests_per_s": round(len(bodies) / wall, 1),
        **({"tokens_per_s": round(tokens / wall, 1)} if "prompt" in bodies[0] else {}),
        "latency_ms_p50": round(statistics.median(ms), 1),
        "latency_ms_p90": round(_percentile(ms, 90), 1),
        "latency_ms_p99": round(_percentile(ms, 99), 1),
        "latency_ms_max": round(max(ms), 1),
    }


def _median_round(rounds: list[dict]) -> dict:
    """The figures of several rounds: each one's median (errors: their sum)."""
    out = dict(rounds[0])
    for key, value in rounds[0].items():
        if isinstance(value, float):
            out[key] = round(statistics.median(r[key] for r in rounds), 1)
    out["errors"] = sum(r["errors"] for r in rounds)
    out["first_errors"] = [e for r in rounds for e in r["first_errors"]][:5]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, default=None, help="the run to serve")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--texts", type=int, default=1, help="texts per request (one batch)")
    parser.add_argument("--endpoint", choices=("classify", "generate"), default="classify")
    parser.add_argument("--new-tokens", type=int, default=48,
                        help="max_new_tokens of each /v1/generate request")  # fmt: skip
    parser.add_argument("--prompt-chars", type=int, default=16,
                        help="characters of each /v1/generate prompt")  # fmt: skip
    # the server's options, passed on when given (else its defaults)
    parser.add_argument("--batch-size", type=int, help="1: no batching across requests")
    parser.add_argument("--batch-wait-ms", type=float)
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto")
    parser.add_argument("--threads", type=int, help="torch threads of the server")
    parser.add_argument("--client", choices=("httpx", "raw"), default="httpx",
                        help="httpx (an AsyncClient), or raw: a minimal HTTP/1.1 client that "
                        "leaves the CPU to the server (the server's capacity on few cores)")  # fmt: skip
    parser.add_argument("--avx2", action="store_true",
                        help="the server with PyTorch held to its AVX2 kernels, fp32")  # fmt: skip
    parser.add_argument("--pairs", type=int, default=0, metavar="N",
                        help="N rounds against two servers, this one and one with "
                        "--batch-size 1, in alternating order (a drifting host's speed "
                        "cancels out); two records, NAME and NAME-unbatched, each round's "
                        "figures and their medians")  # fmt: skip
    parser.add_argument("--against-src", type=Path, metavar="PATH",
                        help="with --pairs: the second server runs attnkit from PATH (another "
                        "revision's src/) with the same options; recorded as NAME-before")  # fmt: skip
    parser.add_argument(
        "--vary-tokens",
        action="store_true",
        help="requests ask for 1/8 to 8/8 of --new-tokens, in a fixed order",
    )
    parser.add_argument("--rate", type=float, metavar="R",
                        help="open loop: requests arrive at R a second (Poisson, seeded), "
                        "each latency counted from its arrival; --concurrency connections "
                        "(raw client)")  # fmt: skip
    parser.add_argument("--name", default="serve-load")
    args = parser.parse_args()
    if args.rate is not None and (args.rate <= 0 or args.client != "raw"):
        parser.error("--rate takes a rate > 0 and --client raw")
    if args.against_src is not None and not args.pairs:
        parser.error("--against-src needs --pairs N")
    if args.against_src is not None and not (args.against_src / "attnkit").is_dir():
        parser.error(f"--against-src {args.against_src}: no attnkit package there")
    generate = args.endpoint == "generate"
    run = args.run or (DEFAULT_LM_RUN if generate else DEFAULT_RUN)
    _ensure_run(run)
    path = f"/v1/{args.endpoint}"
    if generate:
        prompts, source = _prompts(args.requests, args.prompt_chars)
        bodies = [{"prompt": p, "max_new_tokens": _new_tokens(args, i), "seed": i}
                  for i, p in enumerate(prompts)]  # fmt: skip
    else:
        texts, source = _texts(args.requests * args.texts)
        bodies = [{"texts": texts[i : i + args.texts]} for i in range(0, len(texts), args.texts)]

    import httpx

    env = {**os.environ, **(AVX2 if args.avx2 else {}), "PYTHONUNBUFFERED": "1"}
    against = args.against_src is not None
    sizes = (
        [args.batch_size]
        if not args.pairs
        else [args.batch_size, args.batch_size if against else 1]
    )
    envs = [env, {**env, "PYTHONPATH": str(args.against_src.resolve())} if against else env]
    servers = []
    try:
        for size, server_env in zip(sizes, envs[: len(sizes)], strict=True):
            server, url = _start(args, run, server_env, size)
            servers.append((server, url))
            # one warm-up request (first-call allocations), then the measured load
            httpx.post(f"{url}{path}", json=bodies[0], timeout=60)
        rss_before = [_rss_mb(server.pid) for server, _ in servers]
        # this process's objects (torch, the texts) out of its collector's sight: a full
        # collection here took ~100 ms, a pause every request in flight would be charged
        gc.collect()
        gc.freeze()
        rounds: list[list[dict]] = [[] for _ in servers]
        for r in range(max(args.pairs, 1)):
            order = range(len(servers)) if r % 2 == 0 else reversed(range(len(servers)))
            for k in order:
                rounds[k].append(_measure(args, servers[k][1], path, bodies))
        rss_after = [_rss_mb(server.pid) for server, _ in servers]
        served = [httpx.get(f"{url}/v1/models", timeout=10).json() for _, url in servers]
    finally:
        for server, _ in servers:
            server.terminate()
            server.wait(timeout=30)

    precision, cpu, threads = (
        _precision(args.precision, env),
        _cpu(),
        args.threads or torch.get_num_threads(),
    )
    names = [args.name, f"{args.name}-before" if against else f"{args.name}-unbatched"]
    revision = _revision(args.against_src) if against else None
    failed = 0
    for k in range(len(servers)):
        info, limits = served[k]["models"][0], served[k]["limits"]
        figures = _median_round(rounds[k])
        record = {
            "name": names[k],
            "kind": "serve",
            "command": command_line("serve_load.py"),
            "run": str(run.resolve().relative_to(ROOT))
            if run.resolve().is_relative_to(ROOT)
            else str(run),
            "model": _served(info, precision, cpu, threads, args.avx2)
            + (f"; attnkit {revision} (--against-src)" if against and k == 1 else ""),
            "kernels": "avx2" if args.avx2 else "default",
            "endpoint": path,
            "texts": source,
            "requests": len(bodies),
            "texts_per_request": 1 if generate else args.texts,
            **(
                {
                    "new_tokens": args.new_tokens,
                    **({"new_tokens_varied": "1/8 to 8/8 of it"} if args.vary_tokens else {}),
                    "sampling": "temperature 1, a seed per request",
                }
                if generate
                else {}
            ),  # fmt: skip
            "concurrency": args.concurrency,
            **({"arrivals_per_s": args.rate, "arrivals": "Poisson, seed 0"} if args.rate else {}),
            "client": args.client,
            # as the server says (None: a server without micro-batching)
            "batch_size": limits.get("batch_size"),
            "batch_wait_ms": limits.get("batch_wait_ms"),
            "precision": precision,
            "server_threads": threads,
            **figures,
            **({"rounds": rounds[k], "paired_with": names[1 - k]} if args.pairs else {}),
            **(
                {"attnkit_src": str(args.against_src), "attnkit_revision": revision}
                if against and k == 1
                else {}
            ),
            "server_rss_mb_before": rss_before[k],
            "server_rss_mb_after": rss_after[k],
            "machine": machine(),
            **cpu,
            "cpu_native_bf16": cpu_native_bf16(),
            "date": time.strftime("%Y-%m-%d"),
        }
        publish(record)
        failed += figures["errors"]
    if failed:
        raise SystemExit(f"{failed} requests failed")


if __name__ == "__main__":
    main()
