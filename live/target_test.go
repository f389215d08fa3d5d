package live_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/live"
)

// sent is a message a target sent, in a form tests can compare.
type sent struct {
	key     string // "s:" + a string key, "b:" + a binary key
	payload string
	deleted bool
}

func sentMessages(t *testing.T, msgs []iggy.Message) []sent {
	t.Helper()
	var out []sent
	for i := range msgs {
		hs := msgs[i].Headers
		m := live.Message{Headers: hs, Payload: msgs[i].Payload}
		s := sent{payload: string(msgs[i].Payload), deleted: live.IsDeleted(m)}
		if k, ok := live.StringKey(m); ok {
			s.key = "s:" + k
		} else if k, ok := live.BytesKey(m); ok {
			s.key = "b:" + k
		}
		out = append(out, s)
	}
	return out
}

func deletionValue(k live.Key) ([]byte, error) { return []byte("deleted " + k.String()), nil }

func declare(t *testing.T, tg *live.Target, kv ...string) {
	t.Helper()
	for i := 0; i+1 < len(kv); i += 2 {
		require.NoError(t, tg.Declare(kv[i], []byte(kv[i+1])))
	}
}

func apply(t *testing.T, tg *live.Target) live.Applied {
	t.Helper()
	a, err := tg.Apply(testCtx(t))
	require.NoError(t, err)
	return a
}

// TestTargetSendsOnlyChangesAcrossRestart: a restarted target, on the same
// state file, sends only the keys that changed and deletion markers for
// the keys that went away.
func TestTargetSendsOnlyChangesAcrossRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "target.json")
	opts := []live.TargetOption{live.WithStateFile(path), live.WithDeletionValue(deletionValue), live.WithPartition(1)}

	tg, err := e.h.Target(ctx, e.stream, e.topic, opts...)
	require.NoError(t, err)
	declare(t, tg, "a", "1", "b", "1", "c", "1")
	require.Equal(t, live.Applied{Upserts: 3}, apply(t, tg))
	declare(t, tg, "a", "1", "b", "1", "c", "1")
	require.Equal(t, live.Applied{Unchanged: 3}, apply(t, tg), "nothing changed: nothing sent")
	require.NoError(t, tg.Close(ctx))
	require.Len(t, e.all(t, 1), 3)
	require.Empty(t, e.all(t, 0), "the target writes its partition only")

	tg, err = e.h.Target(ctx, e.stream, e.topic, opts...)
	require.NoError(t, err)
	require.Equal(t, []live.Key{{Name: "a"}, {Name: "b"}, {Name: "c"}}, tg.Published())
	declare(t, tg, "b", "2", "a", "1", "d", "1")
	require.Equal(t, live.Applied{Upserts: 2, Deletes: 1, Unchanged: 1}, apply(t, tg))
	require.NoError(t, tg.Close(ctx))
	require.Equal(t, []sent{
		{"s:a", "1", false}, {"s:b", "1", false}, {"s:c", "1", false},
		{"s:b", "2", false}, {"s:d", "1", false}, {"s:c", "deleted c", true},
	}, sentMessages(t, e.all(t, 1)))

	// A Map on the partition mirrors what was declared last.
	m, err := e.h.Map(ctx, e.stream, e.topic, live.StringKey, live.WithDeletion(live.IsDeleted), live.WithPartition(1))
	require.NoError(t, err)
	nextEvents(t, m, 3)
	require.True(t, closed(m.Ready()))
	require.Equal(t, map[string]string{"a": "1", "b": "2", "d": "1"}, contents(m))
	require.NoError(t, m.Close(ctx))
}

// TestTargetDeletionNeedsAFunction: without a deletion-value function a
// deletion is an error, and nothing of the round is sent.
func TestTargetDeletionNeedsAFunction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	store := live.NewMemoryStore()
	tg, err := e.h.Target(ctx, e.stream, e.topic, live.WithStore(store))
	require.NoError(t, err)
	declare(t, tg, "a", "1")
	apply(t, tg)

	declare(t, tg, "b", "1") // a is gone, b is new
	_, err = tg.Apply(ctx)
	require.ErrorIs(t, err, live.ErrNoDeletionValue)
	require.ErrorContains(t, err, "the first: a")
	require.Len(t, e.all(t, 0), 1, "nothing of the round was sent")
	require.Equal(t, []live.Key{{Name: "a"}}, tg.Published())

	// The declarations stay: declaring a again makes the round valid.
	declare(t, tg, "a", "1")
	require.Equal(t, live.Applied{Upserts: 1, Unchanged: 1}, apply(t, tg))

	_, err = tg.Drain(ctx)
	require.ErrorIs(t, err, live.ErrNoDeletionValue, "draining needs deletion markers too")
	require.NoError(t, tg.Close(ctx))

	failing := func(k live.Key) ([]byte, error) { return nil, errors.New("no marker for " + k.String()) }
	tg, err = e.h.Target(ctx, e.stream, e.topic, live.WithStore(store), live.WithDeletionValue(failing))
	require.NoError(t, err)
	_, err = tg.Apply(ctx)
	require.ErrorContains(t, err, "no marker for a")
	empty := func(live.Key) ([]byte, error) { return nil, nil }
	tg, err = e.h.Target(ctx, e.stream, e.topic, live.WithStore(store), live.WithDeletionValue(empty))
	require.NoError(t, err)
	_, err = tg.Apply(ctx)
	require.ErrorIs(t, err, live.ErrInvalidOption)
	require.ErrorContains(t, err, "deletion value for key a is empty")
	require.Len(t, e.all(t, 0), 2)
}

// TestTargetDrain: draining sends a deletion marker for every key, leaves
// an empty state and closes the target.
func TestTargetDrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	store := live.NewMemoryStore()
	opts := []live.TargetOption{live.WithStore(store), live.WithDeletionValue(deletionValue)}
	tg, err := e.h.Target(ctx, e.stream, e.topic, opts...)
	require.NoError(t, err)
	declare(t, tg, "a", "1", "b", "1")
	require.NoError(t, tg.DeclareBytes([]byte{0xca, 0xfe}, []byte("bin")))
	apply(t, tg)
	declare(t, tg, "c", "declared but never applied")

	a, err := tg.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, live.Applied{Deletes: 3}, a)
	require.Equal(t, []sent{
		{"s:a", "1", false}, {"s:b", "1", false}, {"b:\xca\xfe", "bin", false},
		{"s:a", "deleted a", true}, {"s:b", "deleted b", true}, {"b:\xca\xfe", "deleted 0xcafe", true},
	}, sentMessages(t, e.all(t, 0)))
	require.ErrorIs(t, tg.Declare("x", []byte("1")), iggy.ErrClosed)
	_, err = tg.Apply(ctx)
	require.ErrorIs(t, err, iggy.ErrClosed)

	tg, err = e.h.Target(ctx, e.stream, e.topic, opts...)
	require.NoError(t, err)
	require.Empty(t, tg.Published(), "a drained target's state is empty")
	require.Equal(t, live.Applied{}, apply(t, tg))
	require.Len(t, e.all(t, 0), 6)
}

// TestTargetAbandon: closing without draining sends nothing and keeps the
// state, so the next target carries on.
func TestTargetAbandon(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "state")
	opts := []live.TargetOption{live.WithStateFile(path), live.WithDeletionValue(deletionValue)}
	tg, err := e.h.Target(ctx, e.stream, e.topic, opts...)
	require.NoError(t, err)
	declare(t, tg, "a", "1", "b", "1")
	apply(t, tg)
	declare(t, tg, "c", "1")
	require.NoError(t, tg.Close(ctx))
	require.NoError(t, tg.Close(ctx), "Close is idempotent")
	require.Len(t, e.all(t, 0), 2, "abandoning sends nothing")

	tg, err = e.h.Target(ctx, e.stream, e.topic, opts...)
	require.NoError(t, err)
	require.Equal(t, []live.Key{{Name: "a"}, {Name: "b"}}, tg.Published())
	declare(t, tg, "a", "1", "b", "1")
	require.Equal(t, live.Applied{Unchanged: 2}, apply(t, tg))
	require.Len(t, e.all(t, 0), 2)
}

// TestTargetKeyNamespaces: a string key and a binary key with the same
// bytes are two keys, in the topic and in the state.
func TestTargetKeyNamespaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	store := live.NewMemoryStore()
	tg, err := e.h.Target(ctx, e.stream, e.topic, live.WithStore(store))
	require.NoError(t, err)
	require.NoError(t, tg.Declare("k", []byte("string")))
	require.NoError(t, tg.DeclareBytes([]byte("k"), []byte("bytes")))
	require.Equal(t, live.Applied{Upserts: 2}, apply(t, tg))

	tg, err = e.h.Target(ctx, e.stream, e.topic, live.WithStore(store))
	require.NoError(t, err)
	require.Equal(t, []live.Key{{Name: "k"}, {Name: "k", Binary: true}}, tg.Published())
	require.NoError(t, tg.Declare("k", []byte("string")))
	require.NoError(t, tg.DeclareBytes([]byte("k"), []byte("bytes2")))
	require.Equal(t, live.Applied{Upserts: 1, Unchanged: 1}, apply(t, tg))
	require.Equal(t, []sent{{"s:k", "string", false}, {"b:k", "bytes", false}, {"b:k", "bytes2", false}},
		sentMessages(t, e.all(t, 0)))
}

func TestTargetDeclareErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	tg, err := e.h.Target(testCtx(t), e.stream, e.topic, live.WithStore(live.NewMemoryStore()))
	require.NoError(t, err)
	for i, tc := range []struct {
		key    string
		binary bool
		value  string
		want   string
	}{
		{"", false, "v", "empty key"},
		{"", true, "v", "empty key"},
		{strings.Repeat("k", 256), false, "v", "256 bytes, at most 255"},
		{strings.Repeat("k", 256), true, "v", "256 bytes, at most 255"},
		{"\xff", false, "v", "not valid UTF-8"},
		{"k", false, "", "value for key k is empty"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var err error
			if tc.binary {
				err = tg.DeclareBytes([]byte(tc.key), []byte(tc.value))
			} else {
				err = tg.Declare(tc.key, []byte(tc.value))
			}
			require.ErrorIs(t, err, live.ErrInvalidOption)
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.NoError(t, tg.DeclareBytes([]byte("\xff"), []byte("v")), "binary keys need not be UTF-8")
	require.NoError(t, tg.Declare(strings.Repeat("k", 255), []byte("v")))
}

func TestTargetOpenErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	_, err := e.h.Target(ctx, e.stream, e.topic)
	require.ErrorIs(t, err, live.ErrInvalidOption)
	require.ErrorContains(t, err, "state store")
	_, err = e.h.Target(ctx, e.stream, e.topic, live.WithStore(nil))
	require.ErrorIs(t, err, live.ErrInvalidOption)
	_, err = e.h.Target(ctx, e.stream, e.topic, live.WithStore(live.NewMemoryStore()), live.WithStateFile("x"))
	require.ErrorIs(t, err, live.ErrInvalidOption)
	_, err = e.h.Target(ctx, e.stream, e.topic, live.WithStore(live.NewMemoryStore()), live.WithPartition(1))
	require.ErrorIs(t, err, iggy.ErrPartitionNotFound)
	_, err = e.h.Target(ctx, e.stream, iggy.NamedID("nope"), live.WithStore(live.NewMemoryStore()))
	require.ErrorIs(t, err, iggy.ErrTopicNotFound)
	_, err = e.admin.GetTopic(ctx, e.stream, iggy.NamedID("nope"))
	require.ErrorIs(t, err, iggy.ErrTopicNotFound, "the target did not create the topic")

	// A state belongs to one target.
	store := live.NewMemoryStore()
	tg, err := e.h.Target(ctx, e.stream, e.topic, live.WithStore(store))
	require.NoError(t, err)
	declare(t, tg, "a", "1")
	apply(t, tg)
	s2, t2 := e.newTopic(t, 1)
	_, err = e.h.Target(ctx, s2, t2, live.WithStore(store))
	require.ErrorIs(t, err, live.ErrStateMismatch)

	// A corrupt state is reported, not taken for an empty one.
	path := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.WriteFile(path, []byte(`{"format":1,"keys":[{"key":"a","sha256":"AAAA"}]}`), 0o600))
	_, err = e.h.Target(ctx, e.stream, e.topic, live.WithStateFile(path))
	require.ErrorIs(t, err, live.ErrCorruptState)
	require.ErrorContains(t, err, "sha256 is 3 bytes")
}

// failingStore fails its saves while fail is set.
type failingStore struct {
	live.MemoryStore
	fail bool
}

func (s *failingStore) Save(ctx context.Context, b []byte) error {
	if s.fail {
		return errors.New("disk full")
	}
	return s.MemoryStore.Save(ctx, b)
}

// TestTargetSaveFailure: a failed save is reported and made good by the
// next Apply, without sending again.
func TestTargetSaveFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	store := &failingStore{fail: true}
	tg, err := e.h.Target(ctx, e.stream, e.topic, live.WithStore(store))
	require.NoError(t, err)
	declare(t, tg, "a", "1")
	_, err = tg.Apply(ctx)
	require.ErrorContains(t, err, "disk full")
	require.Len(t, e.all(t, 0), 1)
	store.fail = false
	require.Equal(t, live.Applied{Unchanged: 1}, apply(t, tg), "the declarations stayed; the value was sent")
	require.Len(t, e.all(t, 0), 1)
	b, err := store.Load(ctx)
	require.NoError(t, err)
	require.Contains(t, string(b), `"key": "a"`)
}
