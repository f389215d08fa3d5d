#!/usr/bin/env bash
# shell-sink: a Ferry sink plugin on the line protocol (docs/plugins.md),
# in bash and jq. It appends each message's payload as a line to the file
# plugin_config's path names, and answers each batch with its result.
set -euo pipefail

read -r open                                   # {"type":"open","config":{...},...}
out=$(jq -r '.config.path' <<<"$open")
reject=$(jq -r '.config.reject // ""' <<<"$open")

while read -r batch; do                        # one batch a line; EOF: Ferry closes us
  seq=$(jq -r '.seq' <<<"$batch")
  # The payload as its JSON text, its text, or its bytes (base64).
  payloads=$(jq -r '.messages[] | if has("payload") then .payload | tojson
    elif has("payload_text") then .payload_text else .payload_base64 | @base64d end' <<<"$batch")
  if [[ -n $reject ]] && grep -qF -- "$reject" <<<"$payloads"; then
    # Refuse those messages for good (dead-lettered), write the others.
    jq -r --arg r "$reject" '.messages[] | if has("payload") then .payload | tojson
      elif has("payload_text") then .payload_text else .payload_base64 | @base64d end
      | select(contains($r) | not)' <<<"$batch" >>"$out"
    jq -c --arg r "$reject" '{type: "result", seq, failed: [.messages | to_entries[]
      | select((.value.payload // .value.payload_text // "" | tostring) | contains($r))
      | {index: .key, kind: "permanent", reason: ("the payload contains " + $r)}]}' <<<"$batch"
    continue
  fi
  if [[ -n $payloads ]]; then
    printf '%s\n' "$payloads" >>"$out"          # one write: a kill leaves no half line
  fi
  printf '{"type":"result","seq":%s,"ok":true}\n' "$seq"
done
