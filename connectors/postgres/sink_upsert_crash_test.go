package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/stretchr/testify/require"
)

// With upsert_by_key, the table after kill -9s and restarts is exactly
// the latest message of each key (deleted keys absent), as computed from
// the topic: the replays after the kills overwrite no newer value and
// leave no deleted key behind.
func TestSinkUpsertByKeySurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	db := newDB(t)
	e := newCrashEnv(t, fmt.Sprintf(`type = "sink"
key = "pg"
path = "libiggy_connector_postgres_sink"
[[streams]]
stream = "in"
topics = ["users"]
schema = "json"
batch_length = 40
poll_interval = "5ms"
consumer_group = "pg_sink"
[plugin_config]
connection_string = %q
target_table = "users"
auto_create_table = true
payload_format = "json"
upsert_by_key = true
`, db.dsn))
	ctx := context.Background()
	_, err := e.Client.CreateStream(ctx, "in")
	require.NoError(t, err)
	_, err = e.Client.CreateTopic(ctx, iggy.NamedID("in"), "users", 1)
	require.NoError(t, err)
	const perSend, keys = 40, 30
	stop := connectortest.Feed(t, 10*time.Millisecond, func(i int) error {
		msgs := make([]iggy.Message, perSend)
		for j := range msgs {
			n := i*perSend + j
			k := fmt.Sprintf("u%d", n*7%keys)
			hs := []iggy.Entry{iggy.Header(iggy.KeyHeader, iggy.StringValue(k))}
			msgs[j].Payload = fmt.Appendf(nil, `{"n":%d}`, n)
			if n%11 == 5 {
				hs, msgs[j].Payload = append(hs, iggy.Header(iggy.DeletedHeader, iggy.BoolValue(true))), []byte("null")
			}
			msgs[j].Headers = hs
		}
		_, err := e.Client.SendMessages(ctx, iggy.NamedID("in"), iggy.NamedID("users"), iggy.ToPartition(0), msgs)
		return err
	})
	maxOffset := func() int {
		var n *int64
		if err := db.pool.QueryRow(ctx, `SELECT max(iggy_offset) FROM users`).Scan(&n); err != nil || n == nil {
			return 0
		}
		return int(*n) + 1
	}
	final := e.KillLoop(nil, 5, func() (int, int) { return maxOffset(), len(e.Topic("in", "users")) })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	total := stop() * perSend

	// The reference: the latest message of each key in the topic (its
	// offset is the feed's n: one sender, one partition; e.Topic drops
	// headers, so the key and the marker are recomputed from n).
	msgs := e.Topic("in", "users")
	require.Len(t, msgs, total)
	want := map[string]string{}
	for _, m := range msgs {
		n := int(m.Offset)
		k := fmt.Sprintf("u%d", n*7%keys)
		if n%11 == 5 {
			require.Equal(t, "null", string(m.Payload))
			delete(want, k)
			continue
		}
		require.Equal(t, fmt.Sprintf(`{"n":%d}`, n), string(m.Payload))
		want[k] = fmt.Sprintf("%s@%d", m.Payload, m.Offset)
	}
	state := func() map[string]string {
		return rows(t, db, `SELECT key, payload::text || '@' || iggy_offset FROM users`)
	}
	eventually(t, "the table equal to the latest message of each key", func() bool {
		return fmt.Sprint(state()) == fmt.Sprint(normalize(want))
	})
	require.Equal(t, normalize(want), state())
	t.Logf("%d messages over %d keys, %d rows after %d kills", total, keys, len(want), e.Kills)
}

// normalize renders want's payloads as PostgreSQL prints jsonb.
func normalize(want map[string]string) map[string]string {
	out := make(map[string]string, len(want))
	for k, v := range want {
		var n, off int
		if _, err := fmt.Sscanf(v, `{"n":%d}@%d`, &n, &off); err == nil {
			v = fmt.Sprintf(`{"n": %d}@%d`, n, off)
		}
		out[k] = v
	}
	return out
}
