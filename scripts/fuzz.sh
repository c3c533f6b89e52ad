#!/usr/bin/env bash
# Runs each libFuzzer target in build/fuzz for SECONDS (default 30), seeded
# from the test data (GGUF files, tokenizer inputs) and from requests written
# here (request bodies, HTTP requests). Fails on any crash.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
testdata="${ROCMFORGE_TESTDATA:-$PWD/../shared/testdata}"
corpus_root="build/fuzz/corpus"
mkdir -p "$corpus_root"
for bin in build/fuzz/tests/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  corpus="$corpus_root/$name"
  mkdir -p "$corpus"
  case "$name" in
    fuzz_gguf)
      # Seeds: the small real files (the vocab-only ones are large; skip them).
      for f in "$testdata"/stories260K.gguf "$testdata"/quant/qtest-q4_0.deq.gguf; do
        [ -f "$f" ] && cp -f "$f" "$corpus/" ;
      done ;;
    fuzz_tokenizer*)
      # Vocabularies to fuzz (':'-separated); byte 0 of an input picks one.
      export ROCMFORGE_FUZZ_VOCAB="${ROCMFORGE_FUZZ_VOCAB:-$testdata/vocab/ggml-vocab-llama-spm.gguf:$testdata/vocab/ggml-vocab-gpt-2.gguf:$testdata/vocab/ggml-vocab-deepseek-coder.gguf}"
      for f in "$testdata"/vocab/*.inp; do [ -f "$f" ] && cp -f "$f" "$corpus/"; done ;;
    fuzz_request)
      # Byte 0 mod 4: /v1/completions, /v1/chat/completions, /v1/messages, /v1/responses; then the body.
      printf '\0{"prompt":"Once upon a time","max_tokens":16,"temperature":0.7,"top_p":0.9,"stop":["\\n"],"seed":3}' > "$corpus/completion"
      printf '\0{"prompt":[[1,2,3],[4]],"logprobs":2,"stream":true,"stream_options":{"include_usage":true}}' > "$corpus/tokens"
      printf '\1{"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"logprobs":true,"top_logprobs":3,"max_completion_tokens":5}' > "$corpus/chat"
      printf '\1{"messages":[{"role":"system","content":"x"}],"top_k":40,"min_p":0.1,"repetition_penalty":1.1,"presence_penalty":-1}' > "$corpus/penalties"
      printf '\1{"messages":[{"role":"assistant","content":"a","reasoning_content":"b"}],"chat_template_kwargs":{"enable_thinking":false},"reasoning_budget":4}' > "$corpus/reasoning"
      printf '\2{"max_tokens":9,"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"thinking":{"type":"enabled","budget_tokens":3}}' > "$corpus/messages"
      printf '\3{"input":[{"role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"}],"tools":[{"type":"function","name":"f"}],"text":{"format":{"type":"json_object"}}}' > "$corpus/responses" ;;
    fuzz_reply)
      # Byte 0: the format and whether tools are parsed; byte 1: the streamed piece size; then the reply.
      printf '\0\3<think>\nhmm\n</think>\n\nHi <tool_call>{"name": "f", "arguments": {}}</tool_call>' > "$corpus/think"
      printf '\2\5<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"x":1}<|call|>' > "$corpus/harmony" ;;
    fuzz_http_request)
      # Byte 0 seeds how the bytes are split; then what a client sends.
      printf '\7POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n{"prompt":"x"}' > "$corpus/post"
      printf '\3POST /v1/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n' > "$corpus/chunked"
      printf '\1GET /health?x=1 HTTP/1.0\r\nConnection: keep-alive\r\nX: a\r\n b\r\n\r\n' > "$corpus/http10" ;;
  esac
  echo "fuzz: $name for ${seconds}s"
  "$bin" "$corpus" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 2>&1 | tail -n 12
done
