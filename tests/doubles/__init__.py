"""The test doubles' one home: what stands in for a component byref's tests do not run for real.

Every double here is the real thing on one side and a script on the other, never a mock of byref:
- `wire`: a recording HTTP transport under a provider's real SDK (Anthropic, OpenAI Responses)
  that plays the model in the provider's own JSON and SSE; `chat_wire`: the same for Chat
  Completions;
- `chat_server`: a Chat Completions endpoint on loopback whose answers a function gives
  (`ChatWire`, over the public `byref.testing.ChatStandIn` server);
- `clock`: a clock a test moves by hand (`ManualClock`).

The public kit (`byref.testing`: `ScriptedModel`, `ChatStandIn`, the store battery) is what a
user's tests import; doubles here build on it, and tests import both from these two places only.
Broken implementations a test exists to catch (a store that folds scopes, a state that forgets)
stay in that test: they are its subject, not a stand-in.
"""
