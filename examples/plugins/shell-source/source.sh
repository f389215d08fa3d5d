#!/usr/bin/env bash
# shell-source: a Ferry source plugin on the line protocol (docs/plugins.md),
# in bash and jq. It follows the file plugin_config's path names and sends
# each line as a message; its state is the number of lines sent, and each
# message's id is made of its line number, so a batch read again after a
# crash carries the same ids.
set -euo pipefail

read -r open                                   # {"type":"open","config":{...},"state":N}
in=$(jq -r '.config.path' <<<"$open")
size=$(jq -r '.config.batch_size // 10' <<<"$open")
schema=$(jq -r '.config.schema // "text"' <<<"$open")
sent=$(jq -r '.state // 0' <<<"$open")          # lines sent before: the saved state

while :; do
  total=0
  [[ -f $in ]] && total=$(wc -l <"$in")        # complete lines only
  if ((total <= sent)); then
    # Nothing new: wait, reading the runtime's lines; EOF means stop.
    if read -r -t 0.05 _; then continue; elif (($? <= 128)); then exit 0; fi
    continue
  fi
  last=$((total < sent + size ? total : sent + size))
  sed -n "$((sent + 1)),${last}p" "$in" | jq -cRn --argjson from "$sent" --arg schema "$schema" '
    [inputs] as $lines
    | {type: "batch", schema: $schema, state: ($from + ($lines | length)),
       messages: [$lines | to_entries[] | {
         id: ("00000000-0000-4000-8000-" + ("000000000000" + ($from + .key + 1 | tostring))[-12:]),
         payload_text: .value}]}'
  sent=$last
  # Wait for the runtime's ack (or nack: the runtime sends the batch again
  # itself) before reading on; EOF means stop.
  read -r _ || exit 0
done
