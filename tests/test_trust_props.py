"""Property: arbitrary model input through `Dispatcher.dispatch` never raises; a tool runs only
with the exact value its ref addresses (or the exact value written); every refusal is bounded
and says what would fit."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.dispatch.pipeline import REFUSAL_MAX
from byref.jsonview import unrecordable
from byref.refs import Blob, MessageRef, envelope, near_envelope, quote
from test_trust import DOC, ROWS, Rig, text_of

TEXT = '{\n  "price": 1.50,\n  "n": 1e2,\n  "k": 1, "k": 2\n}'


def _build() -> tuple[Rig, dict[tuple[int, str | None], Any], str]:
    rig = Rig()
    inline_seq, _ = rig.call("echo", {"x": {"rows": [1, 2, {"a": "b"}]}})
    rig.received.clear()
    ok_seq, _ = rig.call("echo", {"x": 0})  # an inline result: the text "ok"
    placed_seq, placed = rig.call("big", {})
    key = msgspec.json.decode(text_of(placed))["value"]["$ref"]["key"]
    marker_seq, _ = rig.call("export", {})
    read_seq, _ = rig.call("read_json", {"source": envelope(MessageRef(part=0, seq=marker_seq,
                                                                    field="value")),
                                         "path": "/items"})
    text_seq, _ = rig.call("text", {})
    rig.received.clear()
    known: dict[tuple[int, str | None], Any] = {
        (ok_seq, None): "ok",
        (placed_seq, None): ROWS, (placed_seq, "value"): ROWS,
        (marker_seq, None): DOC, (marker_seq, "value"): DOC,
        (read_seq, "value"): DOC["items"],
        (text_seq, None): TEXT,
        (inline_seq - 1, "input.x"): {"rows": [1, 2, {"a": "b"}]},
    }
    return rig, known, key


RIG, KNOWN, KEY = _build()
BASE = len(RIG.transcript)

_text = st.one_of(st.text(max_size=12), st.sampled_from(["value", "rows", "x", "art_1"]),
                  st.text(st.characters(codec=None, exclude_categories=()), max_size=4))
HUGE = "<an integer of 4,501 digits>"
"""Stands for 10**4500 in generated input (hypothesis cannot print the integer itself)."""
_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.just(HUGE),
                     st.floats(allow_nan=False, allow_infinity=False), _text)
_json = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)), max_leaves=8)
_digits = st.sampled_from(["0", "3", "²", "٣", "３", "𝟑", "10", "9" * 30])
_field = st.one_of(st.none(), st.sampled_from(["value", "input.x", "value.3", "value.items.1"]),
                   st.builds(lambda d: f"value.{d}", _digits), _text)
_known_ref = st.sampled_from(sorted(KNOWN, key=str)).map(
    lambda k: envelope(MessageRef(part=0, seq=k[0], field=k[1])))
_any_ref = st.builds(lambda seq, part, fld: {"$ref": {
    "type": "Message", "seq": seq, "part": part, **({} if fld is None else {"field": fld})}},
    st.one_of(st.integers(-2, BASE + 2), st.just(HUGE), _text), st.integers(-1, 2), _field)
_blob = st.one_of(st.just(envelope(Blob(key=KEY))),
                  st.builds(lambda s: {"$ref": {"type": "Blob", "key": f"art_{s}"}}, _text),
                  st.builds(lambda s: {"$ref": {"type": "Blob", "key": s}}, _text))
_lookalike = st.builds(lambda k, body, extra: {k: body, **extra},
                       st.sampled_from(["$ref", "$REF", "＄ref", "$rеf", "$Ref", "ref"]),
                       st.one_of(_json, st.just({"type": "Message", "part": 0})),
                       st.dictionaries(st.sampled_from(["note", "x"]), _scalars, max_size=1))
_recipe = st.just({"$ref": {"type": "JsonPointer", "source": {"type": "Blob", "key": KEY},
                            "path": "/0"}})
_value = st.one_of(_json, _known_ref, _known_ref, _known_ref, _any_ref, _blob, _lookalike,
                   _recipe,
                   st.builds(lambda r: {"$ref": {"type": "Blob", "source": r["$ref"]}},
                             _known_ref))


def _inflate(value: Any) -> Any:
    if value == HUGE:
        return 10 ** 4_500
    if isinstance(value, dict):
        return {k: _inflate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_inflate(v) for v in value]
    return value


def _walk(value: Any, path: str | None) -> tuple[bool, Any]:
    """An independent reading of the dot-path law: ASCII digits index arrays."""
    for seg in (path.split(".") if path else []):
        if isinstance(value, dict) and seg in value:
            value = value[seg]
        elif isinstance(value, list) and seg.isascii() and seg.isdigit() and len(seg) < 19 \
                and int(seg) < len(value):
            value = value[int(seg)]
        else:
            return False, None
    return True, value


def _expected(x: Any) -> tuple[bool, Any]:
    """(may run, the exact value the tool must then receive) for argument `x`."""
    if not isinstance(x, dict) or "$ref" not in x or len(x) != 1:
        return (near_envelope(x) is None, x)
    body = x["$ref"]
    if isinstance(body, dict) and body.get("type") == "Blob" and body.get("key") == KEY:
        return True, ROWS
    if isinstance(body, dict) and body.get("type") == "Blob" and isinstance(
            body.get("source"), dict):
        body = body["source"]
    if not isinstance(body, dict) or body.get("type") != "Message" or body.get("part") != 0:
        return True, None  # may run only if it resolves; checked loosely below
    fld = body.get("field")
    roots = {root: v for (seq, root), v in KNOWN.items() if seq == body.get("seq")}
    if fld is None:
        return (True, roots[None]) if None in roots else (True, None)
    if not isinstance(fld, str):
        return False, None
    for root in sorted((r for r in roots if r), key=len, reverse=True):
        if fld == root or fld.startswith(root + "."):
            return _walk(roots[root], fld[len(root) + 1:])
    return True, None


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(*[st.builds(lambda v: {"x": v}, _value)] * 4, _value))
def test_dispatch_never_raises_and_delivers_only_what_is_addressed(args: Any) -> None:
    args = _inflate(args)
    RIG.received.clear()
    _, part = RIG.call("echo", args)  # raises if dispatch raised or the part is unrecordable
    shown = text_of(part)
    if part.is_error:
        event("refused")
        assert RIG.received == []
        assert len(shown) < 2_000 and len(shown) <= REFUSAL_MAX
        return
    assert len(RIG.received) == 1
    got = RIG.received[0]
    x = args.get("x") if isinstance(args, dict) and set(args) == {"x"} else None
    if x is None and not (isinstance(args, dict) and "x" in args):
        return  # a whole-input ref that resolved to an object with x: checked by the tool
    may_run, value = _expected(x)
    assert may_run, f"ran with {quote(got)} for {quote(x)}"
    if value is not None or x is None:
        event("ran with an exactly checked value")
        assert got == value
    assert unrecordable(got) is None or got is x


# -- look-alike envelope keys: whatever pads or disguises `$ref`, it is refused, never data ------
_PAD = st.text(st.sampled_from(
    [" ", "\t", "\n", "\r", "\x00", "\x1f", "\x7f", "\u00a0", "\u200b", "\u200c", "\u200d",
     "\u2060", "\ufeff", "\u202e", "\u2028", "\u3000", "\ufe0f", "\u0301", "\U000e0020"]),
    max_size=4)
_CHAR = {"$": ["$", "＄", "﹩"], "r": ["r", "R", "ｒ", "Ｒ"], "e": ["e", "E", "é", "ｅ", "е"],
         "f": ["f", "F", "ｆ"]}


@st.composite
def _look_alike(draw: st.DrawFn) -> str:
    key = draw(_PAD)
    for ch in "$ref":
        key += draw(st.sampled_from(_CHAR[ch])) + draw(_PAD)
    return key


@settings(max_examples=examples(300), deadline=None)
@given(_look_alike())
def test_every_key_that_reads_as_ref_is_refused_with_the_valid_form(key: str) -> None:
    body = {"type": "Message", "seq": 0, "part": 0}
    if key == "$ref":
        return  # the envelope itself
    event("padded" if fold_differs(key) else "confusable only")
    assert near_envelope({key: body}) is not None, repr(key)
    rig = Rig()
    _, out = rig.call("echo", {"x": {key: body}})
    assert out.is_error and rig.received == [], repr(key)
    assert '{"$ref": {"type": "Message"' in text_of(out)


def fold_differs(key: str) -> bool:
    return key.strip() != key or not key.isprintable()


@settings(max_examples=examples(200), deadline=None)
@given(st.text(st.characters(codec="ascii"), max_size=8))
def test_keys_that_do_not_read_as_ref_are_data(key: str) -> None:
    squeezed = "".join(ch for ch in key if ch.isprintable() and not ch.isspace()).casefold()
    if squeezed == "$ref":
        return
    assert near_envelope({key: {"type": "Message", "seq": 0, "part": 0}}) is None, repr(key)
