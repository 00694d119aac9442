"""References: the `$ref` envelope and the four-member union.

Owns the vocabulary the model routes instead of bytes. Pure: no I/O, imports only byref.errors.

The law: the model may author `Message` and `Blob` refs and nothing else. `JsonPointer` and
`JsonQuery` are recipes only server code constructs (with the constructors below); the model-input
parser refuses them, so a fabricated ref fails validation instead of fabricating data. Every refusal
is a `RefRefusal` whose text says what was wrong and what would fit. A `Message` ref may also be
written as a handle, the string a result's ref line shows (`{"$ref": "r75061770"}`, `handle`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from byref.errors import InvalidValue, Refused

ENVELOPE_KEY: Final = "$ref"
DEFAULT_VALIDATION_CAP: Final = 8
"""How deeply refs may nest inside one envelope when input is parsed."""

KEY_PREFIX: Final = "art_"
KEY_PATTERN: Final = "art_[0-9A-Za-z]{22}"
"""A minted artifact key, the string a Blob ref names: `art_` and 22 base-62 characters (the
one home of this fact: the store mints keys in it, schemas and resource URIs match it)."""
_KEY_RE: Final = re.compile(KEY_PATTERN)
_FIELD_RE: Final = re.compile(r"^[^.\s]+(\.[^.\s]+)*$")
INDEX_MAX: Final = 2**53 - 1
"""The largest `seq` or `part` a ref may name: JSON's safe integer (seqs are ~11 digits), so an
index is never a thousand-digit number quoted back or carried into a lookup."""
QUOTE_CHARS: Final = 100
"""At most this many characters of any offending value are quoted back in a refusal."""
HANDLE_DIGITS: Final = 9
"""A handle names a message by the last this-many digits of its seq (`handle`)."""
HANDLE_SPAN: Final = 10**HANDLE_DIGITS
_HANDLE_RE: Final = re.compile(
    rf"r([0-9]{{1,{HANDLE_DIGITS}}})(?:p([0-9]{{1,16}}))?(?:\.([^.\s]+(?:\.[^.\s]+)*))?")
_LINE_WRAP: Final = re.compile(r"\s*(?:\[\s*ref\b\s*:?\s*(.*?)\s*\]|(.*?))\s*", re.S)


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """`repr(value)` bounded to about `limit` characters, saying the true size when cut.

    Never raises: an integer too long for `repr` (over 4,300 digits) is described by its digit
    count, and a value whose repr fails is named by its type.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4_000:
        digits = int(value.bit_length() * 0.30102999566398) + 1  # exact, or one over
        if abs(value) < 10 ** (digits - 1):
            digits -= 1
        return f"an integer of {digits:,} digits"
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value):,} characters)"
    try:
        text = repr(value)
    except Exception:  # a huge integer nested in a container, a hostile __repr__
        return f"a {type(value).__name__} value"
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters as written)"


class RefRefusal(Refused, ValueError):
    """A ref the model wrote cannot be accepted. The message is shown to the model as-is."""


@dataclass(frozen=True, slots=True)
class MessageRef:
    """A part of the transcript: message `seq` (None = the current turn), part, dot-path field.

    `tail` is set when the model wrote a handle (`"r75061770"`): the message is the latest one,
    at or before the turn it is read in, whose seq ends in those digits (`at` pins it; the seq,
    once pinned, is kept beside the tail so a refusal can name the handle the model wrote).
    """

    part: int
    seq: int | None = None
    field: str | None = None
    tail: int | None = None

    def at(self, current: int) -> MessageRef:
        """This ref with its seq fixed as read in turn `current` (itself when it has one)."""
        if self.seq is not None:
            return self
        if self.tail is None:
            return MessageRef(part=self.part, seq=current, field=self.field)
        return MessageRef(part=self.part, seq=current - (current - self.tail) % HANDLE_SPAN,
                          field=self.field, tail=self.tail)

    @property
    def handle(self) -> str | None:
        """The handle the model wrote for this ref, or None for the long form."""
        if self.tail is None:
            return None
        return handle(self.tail, self.part) + ("" if self.field is None else f".{self.field}")

    def to_json(self) -> dict[str, Any]:
        """This address in its wire form (`{"type": "Message", ...}`); a handle's once pinned."""
        if self.tail is not None and self.seq is None:
            raise InvalidValue(f"The handle {self.handle!r} has no seq yet: pin it with "
                               "MessageRef.at(current_seq) before writing it out.")
        out: dict[str, Any] = {"type": "Message"}
        if self.seq is not None:
            out["seq"] = self.seq
        out["part"] = self.part
        if self.field is not None:
            out["field"] = self.field
        return out


@dataclass(frozen=True, slots=True)
class Blob:
    """Stored bytes, by minted key (`art_…`) or through another ref."""

    key: str | None = None
    source: Ref | None = None

    def __post_init__(self) -> None:
        if (self.key is None) == (self.source is None):
            raise InvalidValue("Blob needs exactly one of key= or source=")

    def to_json(self) -> dict[str, Any]:
        """This address in its wire form: by `key`, or by the recipe it derives from."""
        if self.key is not None:
            return {"type": "Blob", "key": self.key}
        assert self.source is not None
        return {"type": "Blob", "source": self.source.to_json()}


@dataclass(frozen=True, slots=True)
class Clause:
    """One filter clause: the item's `field` equals `eq`, or its string contains `contains`."""

    field: str
    eq: Any = None
    contains: str | None = None
    has_eq: bool = False

    @staticmethod
    def equals(field_name: str, value: Any) -> Clause:
        """A clause matching items whose `field_name` equals `value`."""
        return Clause(field_name, eq=value, has_eq=True)

    @staticmethod
    def containing(field_name: str, text: str) -> Clause:
        """A clause matching items whose `field_name` contains the substring `text`."""
        return Clause(field_name, contains=text)

    def to_json(self) -> dict[str, Any]:
        """This clause in its wire form (`eq` or `contains`)."""
        if self.has_eq:
            return {"field": self.field, "eq": self.eq}
        return {"field": self.field, "contains": self.contains}


@dataclass(frozen=True, slots=True)
class JsonPointer:
    """Server-only recipe: one node (RFC 6901 `path`) of the JSON document behind `source`."""

    source: Ref
    path: str

    def to_json(self) -> dict[str, Any]:
        """This recipe in its wire form."""
        return {"type": "JsonPointer", "source": self.source.to_json(), "path": self.path}


@dataclass(frozen=True, slots=True)
class JsonQuery:
    """Server-only recipe: the array at `path` behind `source`, filtered by ANDed clauses."""

    source: Ref
    path: str
    filter: tuple[Clause, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        """This recipe in its wire form, its filter clauses included."""
        return {
            "type": "JsonQuery",
            "source": self.source.to_json(),
            "path": self.path,
            "filter": [c.to_json() for c in self.filter],
        }


Ref: TypeAlias = MessageRef | Blob | JsonPointer | JsonQuery
MODEL_TYPES: Final = ("Message", "Blob")
RECIPE_TYPES: Final = ("JsonPointer", "JsonQuery")


def envelope(ref: Ref) -> dict[str, Any]:
    """The JSON form `{"$ref": {...}}` (a handle not yet pinned: `{"$ref": "r…"}`, as written)."""
    if isinstance(ref, MessageRef) and ref.seq is None and ref.handle is not None:
        return {ENVELOPE_KEY: ref.handle}
    return {ENVELOPE_KEY: ref.to_json()}


def handle(seq: int, part: int = 0) -> str:
    """The short form of message `seq`, part `part`: `r` and the seq's last nine digits, then
    `p` and the part unless it is 0 (`"r75061770"`, `"r75061770p2"`).

    Nine digits are three o200k tokens, and resolution picks the latest seq ending in them, so
    a handle names one message of a record shorter than a billion messages; seqs are
    milliseconds-since-2026 origins, so a handle shown by a process that has since restarted
    (and kept no state) names no message of the new record for a billion milliseconds (11.6
    days), and after that only if one of the new record's seqs ends in the same nine digits.
    """
    tail = seq % HANDLE_SPAN
    return f"r{tail}" if part == 0 else f"r{tail}p{part}"


def handle_envelope(seq: int, part: int = 0) -> dict[str, Any]:
    """`{"$ref": "r…"}`: the envelope a model writes for message `seq`, part `part`."""
    return {ENVELOPE_KEY: handle(seq, part)}


def _unwrapped(text: str) -> str:
    """`text` without surrounding spaces and the ref line's `[ref …]` around it."""
    found = _LINE_WRAP.fullmatch(text[:QUOTE_CHARS])
    if found is None:  # pragma: no cover - the pattern matches any string
        return text
    return found.group(1) if found.group(1) is not None else found.group(2)


def is_handle_like(text: object) -> bool:
    """Whether `text` is a handle, or one as the ref line shows it (`[ref r75061770]`, spaced)."""
    return isinstance(text, str) and _HANDLE_RE.fullmatch(_unwrapped(text)) is not None


def parse_handle(text: object) -> MessageRef:
    """The ref a handle string stands for (not yet pinned: `MessageRef.at`); raises
    `RefRefusal` saying the form for anything else."""
    found = _HANDLE_RE.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        if is_handle_like(text):
            assert isinstance(text, str)
            raise RefRefusal(
                f"The handle is written {quote(text)}; write the handle alone, exactly as "
                f'the ref line shows it inside [ref …]: {{"$ref": "{_unwrapped(text)}"}}.')
        raise RefRefusal(
            f"A reference written as a string must be a handle copied from a result's ref line, "
            f"such as \"r75061770\" (or \"r75061770.rows.0\" for a part of it), got "
            f"{quote(text)}. {_MODEL_HINT}")
    tail, part, fld = found.groups()
    return MessageRef(part=0 if part is None else _index(int(part), "part"), field=fld,
                      tail=int(tail))


def is_envelope(value: object) -> bool:
    """True when `value` is shaped like a `$ref` envelope (a dict whose only key is `$ref`)."""
    return isinstance(value, dict) and ENVELOPE_KEY in value and len(value) == 1


ENVELOPE_RULE: Final = (
    "An argument object whose '$ref' (or a look-alike key such as '$REF', '＄ref', '$rеf' with "
    "a Cyrillic letter, or '$ref' padded with spaces or invisible characters) holds an object is "
    'always read as a reference, and must then be exactly {"$ref": {...}} with no other keys. A '
    "tool whose own schema accepts such an object receives it only nested below the top level "
    "of an argument. A '$ref' holding a handle string (\"r75061770\", from a result's ref line) "
    "is a reference too and must also stand alone; one holding any other string beside other "
    "keys (as in JSON Schema) is plain data."
)
LOOK_ALIKE_CHARS: Final = 64
"""Longer keys are never taken for `$ref` (padding past this is not a plausible slip)."""
_INVISIBLE: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Me"})
"""Unicode categories dropped before comparing: controls, format characters (zero-width
spaces, joiners, bidi marks, tags), separators and combining marks — none changes what a
reader sees in `$ref` but the look of the spacing."""


def fold_key(key: str) -> str:
    """`key` as a reader sees it: decomposed (NFKD: width, compatibility forms, accents apart),
    without whitespace, control, format and combining characters, recomposed and casefolded
    (`" $RÉF\u200b"` → `"$ref"`)."""
    text = unicodedata.normalize("NFKD", key)
    text = "".join(ch for ch in text
                   if not ch.isspace() and unicodedata.category(ch) not in _INVISIBLE)
    return unicodedata.normalize("NFKC", text).casefold()


def looks_like_ref_key(key: object) -> bool:
    """True when `key` is `$ref` or is confusable with it: case, width, homoglyphs, accents, and
    padding or interleaving with whitespace, control or invisible characters (`fold_key`)."""
    if not isinstance(key, str) or len(key) > LOOK_ALIKE_CHARS:
        return False
    if key == ENVELOPE_KEY:
        return True
    folded = fold_key(key)
    if folded == ENVELOPE_KEY:
        return True
    if len(folded) != len(ENVELOPE_KEY) or folded.isascii():
        return False
    from confusables import is_confusable  # lazy: its tables load only for non-ASCII keys

    return bool(is_confusable(folded, ENVELOPE_KEY))


def near_envelope(value: object) -> str | None:
    """Why `value` is almost, but not exactly, a `$ref` envelope; None when it is not one.

    Almost: an object with a `$ref`-like key holding an object, that is not the single key `$ref`
    (extra keys beside it, or a look-alike key). Refused rather than passed on as a literal dict.
    """
    if not isinstance(value, dict) or is_envelope(value):
        return None
    for key, body in value.items():
        if (isinstance(body, dict) or is_handle_like(body)) and looks_like_ref_key(key):
            if key != ENVELOPE_KEY:
                return (f"It has the key {quote(key)}, which looks like '$ref' but is not it. "
                        f"{_MODEL_HINT}")
            extra = [k for k in value if k != ENVELOPE_KEY]
            shown = ", ".join(quote(k, 40) for k in extra[:5])
            more = f" and {len(extra) - 5:,} more" if len(extra) > 5 else ""
            return (f"It has key(s) {shown}{more} beside '$ref'; a reference is an object with "
                    f"the single key '$ref'. {_MODEL_HINT}")
    return None


def is_ref(value: object) -> bool:
    """Whether `value` is a parsed reference (an address or a recipe)."""
    return isinstance(value, MessageRef | Blob | JsonPointer | JsonQuery)


def is_recipe(ref: Ref) -> bool:
    """Whether `ref` is a recipe (derived from another ref) rather than an address."""
    return isinstance(ref, JsonPointer | JsonQuery)


def depth(ref: Ref) -> int:
    """How many refs are nested in `ref`, itself included."""
    if isinstance(ref, MessageRef) or (isinstance(ref, Blob) and ref.source is None):
        return 1
    assert ref.source is not None
    return 1 + depth(ref.source)


# ---------------------------------------------------------------------------------------------
# Parsing. One walker serves both audiences: model input (recipes refused) and server records.

_ALLOWED_KEYS: Final[dict[str, frozenset[str]]] = {
    "Message": frozenset({"type", "seq", "part", "field"}),
    "Blob": frozenset({"type", "key", "source"}),
    "JsonPointer": frozenset({"type", "source", "path"}),
    "JsonQuery": frozenset({"type", "source", "path", "filter"}),
}

_MODEL_HINT: Final = (
    'Write {"$ref": "r<digits>"} with the handle of a result\'s ref line, {"$ref": {"type": '
    '"Message", "seq": <int>, "part": <int>, "field": "<dot.path>"}} or {"$ref": {"type": '
    '"Blob", "key": "art_…"}}, copying the ref from an earlier result.'
)


def parse_model_envelope(value: object, *, cap: int = DEFAULT_VALIDATION_CAP) -> Ref:
    """Parse a `$ref` envelope the model wrote (an object body, or a handle string). Raises
    `RefRefusal` with model-facing text."""
    if not is_envelope(value):
        raise RefRefusal(f"A reference must be an object with the single key '$ref'. {_MODEL_HINT}")
    assert isinstance(value, dict)
    return parse_model_ref(value[ENVELOPE_KEY], cap=cap)


def parse_model_ref(body: object, *, cap: int = DEFAULT_VALIDATION_CAP) -> Ref:
    """Parse the body of an envelope (the object or handle under `$ref`) written by the model."""
    if isinstance(body, str):
        return parse_handle(body)
    return _parse(body, model=True, cap=cap, level=1)


def parse_server_ref(body: object, *, cap: int = DEFAULT_VALIDATION_CAP) -> Ref:
    """Parse a ref body recorded by server code; all four members are accepted."""
    return _parse(body, model=False, cap=cap, level=1)


def _parse(body: object, *, model: bool, cap: int, level: int) -> Ref:
    if level > cap:
        raise RefRefusal(
            f"The reference nests more than {cap} levels deep. Refer to the value directly: "
            f"{_MODEL_HINT}"
        )
    if not isinstance(body, dict):
        raise RefRefusal(f"A reference body must be an object, got {_kind(body)}. {_MODEL_HINT}")
    kind = body.get("type")
    if not isinstance(kind, str) or kind not in _ALLOWED_KEYS:
        raise RefRefusal(
            f"Unknown reference type {quote(kind)}; the types you may write are 'Message' and "
            "'Blob'. "
            f"{_MODEL_HINT}"
        )
    if model and kind in RECIPE_TYPES:
        raise RefRefusal(
            f"References of type {kind!r} are built by the server and cannot be written. To pass "
            "a derived value, refer to the result that carries it with a 'Message' ref (its seq, "
            "part and field, as shown in that result)."
        )
    extra = sorted(set(body) - _ALLOWED_KEYS[kind])
    if extra:
        allowed = ", ".join(repr(k) for k in sorted(_ALLOWED_KEYS[kind]))
        raise RefRefusal(
            f"A {kind!r} reference has unexpected key(s) "
            f"{', '.join(quote(k, 40) for k in extra[:5])}{'…' if len(extra) > 5 else ''}; "
            f"allowed: {allowed}."
        )
    if kind == "Message":
        return _parse_message(body)
    if kind == "Blob":
        return _parse_blob(body, model=model, cap=cap, level=level)
    source = _parse_source(body, kind, model=model, cap=cap, level=level)
    path = body.get("path")
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise RefRefusal(
            f"A {kind!r} recipe needs 'path' as a JSON Pointer string, got {quote(path)}."
        )
    if kind == "JsonPointer":
        return JsonPointer(source, path)
    return JsonQuery(source, path, _parse_filter(body.get("filter", [])))


def _parse_message(body: dict[str, Any]) -> MessageRef:
    if "part" not in body:
        raise RefRefusal(
            "A 'Message' reference needs 'part' (a non-negative integer). " + _MODEL_HINT
        )
    part = _index(body["part"], "part")
    seq = None if body.get("seq") is None else _index(body["seq"], "seq")
    fld = body.get("field")
    if fld is not None and (not isinstance(fld, str) or not _FIELD_RE.match(fld)):
        raise RefRefusal(
            f"A 'Message' reference's 'field' must be a dot-path string such as 'value' or "
            f"'result.items', got {quote(fld)}."
        )
    return MessageRef(part=part, seq=seq, field=fld)


def _parse_blob(body: dict[str, Any], *, model: bool, cap: int, level: int) -> Blob:
    has_key, has_source = "key" in body, "source" in body
    if has_key == has_source:
        raise RefRefusal(
            "A 'Blob' reference needs exactly one of 'key' (an art_… key from an earlier result) "
            "or 'source' (another reference)."
        )
    if has_key:
        key = body["key"]
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            raise RefRefusal(
                "A 'Blob' key looks like 'art_' followed by 22 letters or digits, got "
                f"{quote(key)}. "
                "Copy it exactly from the result that returned it."
            )
        return Blob(key=key)
    return Blob(source=_parse(body["source"], model=model, cap=cap, level=level + 1))


def _parse_source(body: dict[str, Any], kind: str, *, model: bool, cap: int, level: int) -> Ref:
    if "source" not in body:
        raise RefRefusal(f"A {kind!r} recipe needs a 'source' reference.")
    return _parse(body["source"], model=model, cap=cap, level=level + 1)


def _parse_filter(raw: object) -> tuple[Clause, ...]:
    if not isinstance(raw, list):
        raise RefRefusal(f"A 'JsonQuery' filter must be a list of clauses, got {_kind(raw)}.")
    clauses: list[Clause] = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("field"), str):
            raise RefRefusal(f"A filter clause needs a string 'field', got {quote(item)}.")
        keys = set(item) - {"field"}
        if keys == {"eq"}:
            clauses.append(Clause.equals(item["field"], item["eq"]))
        elif keys == {"contains"} and isinstance(item["contains"], str):
            clauses.append(Clause.containing(item["field"], item["contains"]))
        else:
            raise RefRefusal(
                f"A filter clause has 'field' and exactly one of 'eq' or 'contains' (a string), "
                f"got {quote(item)}."
            )
    return tuple(clauses)


def _index(value: object, name: str) -> int:
    # bool is an int subclass; True is not a message number.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RefRefusal(f"'{name}' must be a non-negative integer, got {quote(value)}.")
    if value > INDEX_MAX:
        raise RefRefusal(
            f"'{name}' must be a non-negative integer of at most {INDEX_MAX:,}, got "
            f"{quote(value, 40)}. Copy the seq and part from the result you mean (each result "
            "names its own), or leave 'seq' out for the current turn."
        )
    return value


def _kind(value: object) -> str:
    names: dict[type, str] = {dict: "an object", list: "an array", str: "a string"}
    return names.get(type(value), type(value).__name__)


# ---------------------------------------------------------------------------------------------
# The JSON Schema alternative that schema rewriting defines once per declaration (`$defs`).

# Deliberately compact: a declaration holds it once (its properties point to it), and the
# protocol paragraph of the system text explains the fields once. The members' rules are the
# parser's, which answers a malformed ref in its own words before any schema check.
MODEL_REF_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        ENVELOPE_KEY: {"type": ["string", "object"],
                       "properties": {"type": {"enum": list(MODEL_TYPES)}}}
    },
    "required": [ENVELOPE_KEY],
    "additionalProperties": False,
}
