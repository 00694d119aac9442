"""The README's Python example runs and prints what it says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs() -> None:
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    code = blocks[0]
    assert len(code.strip().splitlines()) <= 26
    expected = re.search(r"print\(.*\)\s+# (.+)", code)
    assert expected is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    assert out.getvalue().strip() == expected.group(1).strip()


def test_readme_gateway_config_is_one_the_gateway_accepts() -> None:
    import json

    from byref.gateway.config import parse_config

    (block,) = re.findall(r"```json\n(.*?)```", README.read_text(), flags=re.S)
    config = parse_config(json.loads(block), source="README", base=README.parent)
    assert [s.name for s in config.servers] == ["git", "filesystem"]
    assert config.usage == README.parent / "usage.jsonl"
