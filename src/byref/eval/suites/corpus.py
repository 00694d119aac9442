"""Large results: lookups and filters over a generated customer corpus of 50 / 500 / 5,000 records.

Three tasks per size: an ID lookup (one field of one record), a multi-field filter (how many
match), and a filtered set handed to a second tool (every matching record, exactly). Inlining
the corpus costs the model the whole corpus each turn; by ref it costs a preview.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from byref.dispatch import Policy
from byref.eval.task import ARMS, Setup, Task
from byref.harness.messages import Request
from byref.harness.scripted import Step, call, last_ref, last_result, say
from byref.tools import BUILTIN_JSON_TOOLS

SIZES = (50, 500, 5000)
REGIONS = ("EU", "NA", "APAC", "LATAM")
STATUSES = ("active", "paused", "churned")
TIERS = ("gold", "silver", "bronze")
WANTED = {"region": "EU", "status": "active", "tier": "gold"}
_WORDS = ("renewal", "pending", "invoice", "contact", "asked", "about", "pricing", "seats",
          "migration", "support", "ticket", "escalated", "quarterly", "review", "booked")
_ANY: dict[str, Any] = {"description": "the answer"}


def corpus(size: int, seed: int = 0) -> list[dict[str, Any]]:
    """`size` customer records, the same for the same seed."""
    rng = random.Random(f"corpus-{size}-{seed}")
    return [{
        "id": f"C-{i + 1:05d}",
        "name": f"Customer {i + 1:05d}",
        "email": f"ops{rng.randrange(10**6):06d}@example{i % 97}.com",
        "region": rng.choice(REGIONS), "status": rng.choice(STATUSES), "tier": rng.choice(TIERS),
        "seats": rng.randint(1, 500),
        "notes": " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 16))),
    } for i in range(size)]


def _matching(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if all(r[k] == v for k, v in WANTED.items())]


def tasks(sizes: Sequence[int] = SIZES, seed: int = 0) -> list[Task]:
    """The suite's tasks: lookup, filter and handoff at each size."""
    out: list[Task] = []
    wanted = ", ".join(f"{k} {v}" for k, v in WANTED.items())
    for size in sizes:
        rows = corpus(size, seed)
        target = rows[(size * 2) // 3]
        chosen = _matching(rows)
        out += [
            _task(f"lookup-{size}", rows, "answer", {"value": target["email"]},
                  f"What is the email address of customer {target['id']}? Give it with the "
                  "answer tool.", size),
            _task(f"filter-{size}", rows, "answer", {"value": len(chosen)},
                  f"How many customers have {wanted}? Give the number with the answer tool.",
                  size),
            _task(f"handoff-{size}", rows, "send_notice", {"rows": chosen},
                  f"Send the renewal notice to every customer with {wanted}: call send_notice "
                  "with their complete records as rows.", size),
        ]
    return out


def _task(name: str, rows: list[dict[str, Any]], final: str, expected: dict[str, Any],
          prompt: str, size: int) -> Task:
    kind = name.split("-")[0]

    def build(arm: str, _: Path) -> Setup:
        setup = Setup([], frozenset({final}), expected,
                      frozenset({"list_customers", final}),
                      policy=Policy.naive() if arm == "inline" else None,
                      code_mode=arm == "code")
        setup.tools = [
            setup.tool("list_customers", "Every customer record (id, name, email, region, "
                       "status, tier, seats, notes) as {\"customers\": [...]}.",
                       {"type": "object", "properties": {}}, lambda _: {"customers": rows}),
            setup.tool("answer", "Give the user's question its answer.",
                       {"type": "object", "properties": {"value": _ANY}, "required": ["value"]},
                       lambda _: "Answer received."),
            setup.tool("send_notice", "Send the renewal notice to the customers in rows (their "
                       "complete records).",
                       {"type": "object", "properties": {"rows": {"type": "array",
                                                                  "items": {"type": "object"}}},
                        "required": ["rows"]},
                       lambda given: f"Notice sent to {len(given.get('rows') or [])} customers."),
        ]
        # The readers are byref's own: declared by the harness once a result is stored.
        setup.allowed = setup.allowed | {t.name for t in BUILTIN_JSON_TOOLS}
        return setup

    return Task("corpus", name, prompt, ARMS, build,
                lambda arm: _oracle(kind, arm, rows, expected),
                {"records": size, "group": f"{size:,} records"})


def _oracle(kind: str, arm: str, rows: list[dict[str, Any]],
            expected: dict[str, Any]) -> list[Step]:
    done = say("Done.")
    final = "send_notice" if kind == "handoff" else "answer"
    if arm == "code":
        test = " and ".join(f"c[{k!r}] == {v!r}" for k, v in WANTED.items())
        pick = {"lookup": f"[c for c in doc['customers'] if c['id'] == "
                          f"{rows[(len(rows) * 2) // 3]['id']!r}][0]['email']",
                "filter": f"len([c for c in doc['customers'] if {test}])",
                "handoff": f"[c for c in doc['customers'] if {test}]"}[kind]
        arg = "rows" if kind == "handoff" else "value"
        program = ("data = tools.list_customers()\n"
                   "doc = data.json() if hasattr(data, 'json') else data\n"
                   f"tools.{final}({arg}={pick})\n")
        return [call("run_code", {"code": program}), done]
    if arm == "inline":
        return [call("list_customers", {}), call(final, expected), done]
    # refs: filter by ref, then hand over the answer as a ref (or, for a count, the number).
    target = rows[(len(rows) * 2) // 3]["id"]
    clauses = ([{"field": "id", "eq": target}] if kind == "lookup"
               else [{"field": k, "eq": v} for k, v in WANTED.items()])

    def query(request: Request) -> dict[str, Any]:
        return {"source": _source(request), "path": "/customers", "filter": clauses}

    def hand_over(request: Request) -> dict[str, Any]:
        found = last_result(request)
        if kind == "filter":
            return {"value": found["count"]}
        ref = found["value"]
        if kind == "lookup":
            inner = dict(ref["$ref"])
            inner["field"] = ".".join(p for p in (inner.get("field"), "0.email") if p)
            return {"value": {"$ref": inner}}
        return {"rows": ref}

    return [call("list_customers", {}), call("query_json", query), call(final, hand_over), done]


def _source(request: Request) -> Any:
    """The export's ref: a stored result's `value`, else the result's own ref line."""
    shown = last_result(request)
    if isinstance(shown, dict) and isinstance(shown.get("value"), dict) \
            and "$ref" in shown["value"]:
        return shown["value"]
    return last_ref(request)
