package runtime

// Connectors as a limited Iggy user (issue 12): a runtime whose [iggy]
// user holds only the rights its connectors need runs them, and one that
// lacks a right stops the connector with an error naming the user, the
// stream and topic, and the permission.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/stretchr/testify/require"
)

// limitedEnv is an env whose runtime logs in to an external broker as
// user "app" with perms, on stream "s" with topic "t" made by root.
func limitedEnv(t *testing.T, perms func(sid, tid uint32) *iggy.Permissions) *env {
	t.Helper()
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root, err := iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer root.Close()
	s, err := root.CreateStream(ctx, "s")
	require.NoError(t, err)
	tp, err := root.CreateTopic(ctx, iggy.NumericID(s.ID), "t", 1)
	require.NoError(t, err)
	_, err = root.CreateUser(ctx, "app", "app-secret", iggy.UserActive, perms(s.ID, tp.ID))
	require.NoError(t, err)

	e := newEnv(t)
	e.write("config.toml", fmt.Sprintf(`
[iggy]
address = %q
username = "app"
password = "app-secret"
[state]
path = "state"
[connectors]
config_type = "local"
config_dir = "connectors"
[http]
enabled = false
`, b.Addr()))
	return e
}

func topicPerms(sid, tid uint32, tp iggy.TopicPermissions) *iggy.Permissions {
	return &iggy.Permissions{Streams: map[uint32]*iggy.StreamPermissions{
		sid: {ReadStream: true, Topics: map[uint32]*iggy.TopicPermissions{tid: &tp}},
	}}
}

const limitedSinkTOML = `
type = "sink"
key = "out"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
`

func TestConnectorsRunAsALimitedUser(t *testing.T) {
	// read_stream on s, read_topic and send_messages on s/t: nothing else.
	e := limitedEnv(t, func(sid, tid uint32) *iggy.Permissions {
		return topicPerms(sid, tid, iggy.TopicPermissions{ReadTopic: true, SendMessages: true})
	})
	e.sources["numbers"] = &seqSource{max: 40, batch: 6}
	e.sinks["out"] = &collectSink{}
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("out", limitedSinkTOML)
	rt := e.start()
	eventually(t, "40 messages at the sink", func() bool { return len(e.sinks["out"].messages()) >= 40 })
	require.Equal(t, seqRange(0, 40), e.sinks["out"].ns(t))
	for _, kind := range []connector.Kind{connector.KindSource, connector.KindSink} {
		for _, info := range rt.Connectors(kind) {
			require.Equal(t, StatusRunning, info.Status, "%s %s: %s", kind, info.Key, info.LastError)
		}
	}
}

// connectorError waits for the connector to stop with an error and
// returns it.
func connectorError(t *testing.T, rt *Runtime, kind connector.Kind, key string) string {
	t.Helper()
	var last string
	eventually(t, key+" in error", func() bool {
		for _, info := range rt.Connectors(kind) {
			if info.Key == key && info.Status == StatusError {
				last = info.LastError
				return true
			}
		}
		return false
	})
	return last
}

func TestAMissingPermissionIsNamed(t *testing.T) {
	t.Run("source without send_messages", func(t *testing.T) {
		e := limitedEnv(t, func(sid, tid uint32) *iggy.Permissions {
			return topicPerms(sid, tid, iggy.TopicPermissions{ReadTopic: true})
		})
		e.sources["numbers"] = &seqSource{max: 5, batch: 5}
		e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
		rt := e.start()
		msg := connectorError(t, rt, connector.KindSource, "numbers")
		require.Contains(t, msg, `the Iggy user "app" may not send messages to topic "t" of stream "s": it needs send_messages`)
		require.Contains(t, msg, "Unauthorized")
		require.Empty(t, e.sources["numbers"].acked, "nothing was acknowledged")
	})
	t.Run("sink that may read the topic but not poll it", func(t *testing.T) {
		e := limitedEnv(t, func(sid, tid uint32) *iggy.Permissions {
			// Global read_streams and read_topics allow get_stream,
			// get_topic and the group, not polling.
			return &iggy.Permissions{Global: iggy.GlobalPermissions{ReadStreams: true, ReadTopics: true}}
		})
		e.sinks["out"] = &collectSink{}
		e.connector("out", limitedSinkTOML)
		rt := e.start()
		msg := connectorError(t, rt, connector.KindSink, "out")
		require.Contains(t, msg, `the Iggy user "app" may not consume topic "t" of stream "s"`)
		require.Contains(t, msg, "it needs read_topic on the topic")
	})
	t.Run("a topic the user may not read", func(t *testing.T) {
		e := limitedEnv(t, func(sid, tid uint32) *iggy.Permissions {
			return topicPerms(sid, tid, iggy.TopicPermissions{SendMessages: true})
		})
		e.sinks["out"] = &collectSink{}
		e.connector("out", limitedSinkTOML)
		rt := e.start()
		msg := connectorError(t, rt, connector.KindSink, "out")
		require.Contains(t, msg, `the Iggy user "app" may not read topic "t" of stream "s": it needs read_topic on the topic`)
	})
}
