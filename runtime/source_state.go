package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ferryhq/ferry/transform"
)

// A source whose transforms keep a keyed state (wasm's state_put) saves
// that state in the same record as its own, so both move together: a
// batch's changes are committed when the batch is delivered and saved
// with the position after it; a batch polled again after a crash finds
// the state as it was before the batch. The record is then an envelope:
// keyedStateMagic, the source's state as a uvarint length and bytes, and
// the transforms' state (transform.Chain.MarshalState). A record without
// the magic is the source's state alone.

// keyedStateMagic starts a state record that holds the transforms' keyed
// state beside the source's.
const keyedStateMagic = "\x00FERRY-KEYED-STATE-1\x00"

// splitState is a saved record's source state and transforms' state (nil
// when it has none).
func splitState(rec []byte) (source, keyed []byte, err error) {
	if len(rec) < len(keyedStateMagic) || string(rec[:len(keyedStateMagic)]) != keyedStateMagic {
		return rec, nil, nil
	}
	r := rec[len(keyedStateMagic):]
	n, k := binary.Uvarint(r)
	if k <= 0 || n > uint64(len(r)-k) {
		return nil, nil, errors.New("a state record with the transforms' keyed state is cut short")
	}
	source = r[k : k+int(n)]
	if len(source) == 0 {
		source = nil // the source had no state yet
	}
	return source, r[k+int(n):], nil
}

// joinState is the record of a source state and the transforms' state.
func joinState(source, keyed []byte) []byte {
	b := make([]byte, 0, len(keyedStateMagic)+binary.MaxVarintLen64+len(source)+len(keyed))
	b = append(b, keyedStateMagic...)
	b = binary.AppendUvarint(b, uint64(len(source)))
	b = append(b, source...)
	return append(b, keyed...)
}

// withKeyedState commits the delivery's keyed-state changes and returns
// the record to save: st (the delivery's source state, nil for none) as
// it is when no transform keeps state, else st, or the last saved source
// state, joined with the transforms' committed state. The commit comes
// before the save: a save that fails for good ends the run, and the next
// run loads the state as saved.
func (r *sourceRun) withKeyedState(st []byte, txs []*transform.Tx) ([]byte, error) {
	if !r.chain.KeepsState() {
		return st, nil
	}
	if len(txs) == 0 && st == nil {
		return nil, nil
	}
	for _, tx := range txs {
		if err := tx.Commit(); err != nil {
			r.m.log.Warn("a transform's keyed state change was left out", "error", err)
		}
	}
	keyed, err := r.chain.MarshalState()
	if err != nil {
		return nil, fmt.Errorf("save the transforms' keyed state: %w", err)
	}
	if st == nil {
		st = r.sourceState
	}
	return joinState(st, keyed), nil
}
