"""Shared builders for the discovery tests (plain functions, not fixtures)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from byref.tools import Tool
from byref.transcript import Part, Transcript

EVAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "eval"
EVAL_MISSING = f"evaluation data not found at {str(EVAL.resolve())!r} (a clone without ../shared)"


def make_tool(name: str, description: str = "", **tags: Any) -> Tool:
    schema = tags.pop("input_schema", {"type": "object", "properties": {}})
    return Tool(name=name, description=description or f"The {name} tool.", fn=lambda **_: None,
                input_schema=schema, **tags)


class Script:
    """Builds a transcript turn by turn: activations, direct calls, refused calls."""

    def __init__(self) -> None:
        self.transcript = Transcript()
        self.transcript.append("user", [Part(type="text", value="go")])
        self._n = 0

    def call(self, name: str, args: dict[str, Any], *, error: bool = False) -> None:
        self._n += 1
        call_id = f"c{self._n}"
        value = {"name": name, "id": call_id, "input": args}
        self.transcript.append("assistant", [Part(type="tool_call", value=value, tool=name,
                                                  call_id=call_id)])
        self.transcript.append("tool", [Part(type="tool_result", value="ok", rendered="ok",
                                             tool=name, call_id=call_id, is_error=error)])

    def activate(self, *names: str, error: bool = False) -> None:
        self.call("activate_tool", {"names": list(names)}, error=error)


def catalog_words(index: Any) -> list[str]:
    """The distinct words of a search index's embedded texts, which a hybrid ranker encodes
    one by one after the documents' texts (`wordnear`)."""
    from byref.discovery.hybrid.wordnear import document_words

    return list(dict.fromkeys(w for d in range(len(index)) for w in document_words(index, d)))
