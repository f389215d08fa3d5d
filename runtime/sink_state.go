package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/state"
	"github.com/ferryhq/ferry/transform"
)

// A sink whose transforms keep a keyed state (wasm's state_put) saves it
// in the state store under "sink~<key>", with the last offset of each
// partition whose changes it holds, after the batch is written and before
// its offset is committed. A crash between the two reads those messages
// again: they see the state as saved, which holds their changes already,
// and their changes this time are dropped, so each message counts once in
// the state (its output, computed from the later state, may differ from
// the first time's). A batch that is not written rolls its changes back.

// sinkStateMagic starts a sink's saved keyed state (version 1).
const sinkStateMagic = "FSKS1"

// sinkKeyed is a sink's keyed state record.
type sinkKeyed struct {
	chain transform.Chain
	store state.Store
	key   string

	mu      sync.Mutex // one save at a time, the offsets with the state
	ver     state.Version
	through map[string]uint64 // "stream/topic/partition" → last offset applied
}

func partitionKey(stream, topic string, partition uint32) string {
	return fmt.Sprintf("%s/%s/%d", stream, topic, partition)
}

// loadSinkKeyed loads a sink's keyed state into chain; nil when no
// transform of chain keeps state.
func loadSinkKeyed(ctx context.Context, store state.Store, connectorKey string, chain transform.Chain) (*sinkKeyed, error) {
	if !chain.KeepsState() {
		return nil, nil
	}
	k := &sinkKeyed{chain: chain, store: store, key: "sink~" + connectorKey, through: map[string]uint64{}}
	st, err := store.Load(ctx, k.key)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return k, nil
	case err != nil:
		return nil, fmt.Errorf("load the transforms' keyed state: %w", err)
	}
	k.ver = st.Version
	keyed, err := k.decode(st.Data)
	if err == nil {
		err = chain.UnmarshalState(keyed)
	}
	if err != nil {
		return nil, fmt.Errorf("load the transforms' keyed state (%s): %w", k.key, err)
	}
	return k, nil
}

// decode reads the offsets of a record into k and returns the chain's part.
func (k *sinkKeyed) decode(rec []byte) ([]byte, error) {
	if len(rec) < len(sinkStateMagic) || string(rec[:len(sinkStateMagic)]) != sinkStateMagic {
		return nil, errors.New("not a sink's keyed state (no FSKS1 header)")
	}
	r := rec[len(sinkStateMagic):]
	count, n := binary.Uvarint(r)
	if n <= 0 || count > uint64(len(r)) {
		return nil, errors.New("a bad partition count")
	}
	r = r[n:]
	for i := uint64(0); i < count; i++ {
		l, n := binary.Uvarint(r)
		if n <= 0 || l > uint64(len(r)-n) {
			return nil, errors.New("a partition name cut short")
		}
		name := string(r[n : n+int(l)])
		r = r[n+int(l):]
		off, n := binary.Uvarint(r)
		if n <= 0 {
			return nil, errors.New("an offset cut short")
		}
		r = r[n:]
		k.through[name] = off
	}
	return r, nil
}

func (k *sinkKeyed) encode(keyed []byte) []byte {
	names := make([]string, 0, len(k.through))
	for p := range k.through {
		names = append(names, p)
	}
	slices.Sort(names)
	b := binary.AppendUvarint([]byte(sinkStateMagic), uint64(len(names)))
	for _, p := range names {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = binary.AppendUvarint(b, k.through[p])
	}
	return append(b, keyed...)
}

// applied is how many of msgs (in offset order, of one partition) the
// saved state holds the changes of already.
func (k *sinkKeyed) applied(msgs []connector.Message) int {
	if k == nil || len(msgs) == 0 {
		return 0
	}
	k.mu.Lock()
	through, ok := k.through[partitionKey(msgs[0].Stream, msgs[0].Topic, msgs[0].Partition)]
	k.mu.Unlock()
	if !ok {
		return 0
	}
	i, _ := slices.BinarySearchFunc(msgs, through+1, func(m connector.Message, off uint64) int {
		switch {
		case m.Offset < off:
			return -1
		case m.Offset > off:
			return 1
		}
		return 0
	})
	return i
}

// commit keeps tx's changes and saves the state with last as the
// partition's last applied offset.
func (k *sinkKeyed) commit(ctx context.Context, tx *transform.Tx, stream, topic string, partition uint32, last uint64) error {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("keep the transforms' keyed state: %w", err)
	}
	p := partitionKey(stream, topic, partition)
	if cur, ok := k.through[p]; !ok || last > cur {
		k.through[p] = last
	}
	keyed, err := k.chain.MarshalState()
	if err != nil {
		return err
	}
	v, err := k.store.Save(ctx, k.key, k.encode(keyed), k.ver)
	if err != nil {
		return fmt.Errorf("save the transforms' keyed state: %w", err)
	}
	k.ver = v
	return nil
}

// applyChain runs the chain on a sink's batch in tx; the messages whose
// changes the saved state holds already (read again after a crash) run
// in a transaction of their own that is rolled back.
func (mem *member) applyChain(ctx context.Context, tx *transform.Tx, msgs []connector.Message, schema connector.Schema) transform.BatchResult {
	chain := mem.r.chain
	n := mem.r.keyed.applied(msgs)
	if n == 0 {
		return chain.ApplyBatch(tx.Context(ctx), msgs, schema)
	}
	again := chain.Begin()
	first := chain.ApplyBatch(again.Context(ctx), msgs[:n], schema)
	again.Rollback()
	if n == len(msgs) {
		return first
	}
	rest := chain.ApplyBatch(tx.Context(ctx), msgs[n:], schema)
	for _, f := range rest.Failed {
		f.Index += n
		first.Failed = append(first.Failed, f)
	}
	first.Messages = append(first.Messages, rest.Messages...)
	first.Filtered += rest.Filtered
	first.Schema = rest.Schema
	return first
}
