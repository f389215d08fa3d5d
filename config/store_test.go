package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
	return p
}

const sinkV0 = `type = "sink"
key = "stdout"
version = 0
name = "printer"
path = "stdout"
[[streams]]
stream = "s"
topics = ["t"]
[plugin_config]
print_payload = false
`

func TestStoreLoadsGoodFilesDespiteBrokenOnes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "stdout.toml", sinkV0)
	writeFile(t, dir, "random.toml", "type = \"source\"\nkey = \"random\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n")
	// broken: a bad duration, a syntax error, an unknown type
	writeFile(t, dir, "pg.toml", "type = \"sink\"\nkey = \"pg\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\npoll_interval = \"soon\"\n")
	writeFile(t, dir, "broken_syntax.toml", "type = \"source\"\nkey = \"x\n")
	writeFile(t, dir, "mystery.toml", "type = \"pipe\"\nkey = \"m\"\n")
	// not connector files
	writeFile(t, dir, ".hidden.toml", "garbage = [")
	writeFile(t, dir, "Cargo.toml", "[package]\nname = \"x\"\n")
	writeFile(t, dir, "notes.txt", "not toml")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub.toml"), 0o755))

	s, err := OpenStore(dir, noEnv)
	require.NoError(t, err)
	set, err := s.Load(t.Context())
	require.NoError(t, err)

	require.Len(t, set.Connectors, 2)
	require.Equal(t, "random", set.Connectors[0].Key, "sources first")
	require.Equal(t, "stdout", set.Connectors[1].Key)
	require.Equal(t, filepath.Join(dir, "stdout.toml"), set.Connectors[1].File)
	require.False(t, set.Connectors[1].CreatedAt.IsZero())

	require.Len(t, set.Errors, 3)
	byKey := map[string]*LoadError{}
	for _, e := range set.Errors {
		byKey[e.Key] = e
	}
	pg := byKey["pg"]
	require.NotNil(t, pg)
	require.Equal(t, KindSink, pg.Type)
	require.Contains(t, pg.Error(), `connector sink "pg"`)
	require.Contains(t, pg.Err.Error(), filepath.Join(dir, "pg.toml")+":6: streams[0].poll_interval: expected a duration")
	syn := byKey["broken_syntax"]
	require.NotNil(t, syn, "the key falls back to the file name")
	require.Contains(t, syn.Err.Error(), "broken_syntax.toml:2: invalid TOML")
	m := byKey["m"]
	require.NotNil(t, m)
	require.Equal(t, Kind(""), m.Type)
	require.Contains(t, m.Err.Error(), `type: expected one of "source", "sink", got "pipe"`)
}

func TestStoreVersions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "stdout_sink.toml", sinkV0)
	s, err := OpenStore(dir, noEnv)
	require.NoError(t, err)
	ctx := t.Context()

	// Create version 1 from a struct, and version 2 from TOML.
	v0, err := s.Get(ctx, KindSink, "stdout", 0)
	require.NoError(t, err)
	next := *v0
	next.Name = "printer v1"
	next.PluginConfig = map[string]any{"print_payload": true}
	next.Consumers = []ConsumerStream{{Stream: "s", Topics: []string{"t", "u"}}} // zero values take defaults
	v1, err := s.Create(ctx, &next)
	require.NoError(t, err)
	require.Equal(t, uint64(1), v1.Version)
	require.Equal(t, filepath.Join(dir, "sink_stdout_1.toml"), v1.File)
	require.Equal(t, uint32(1000), v1.Consumers[0].BatchLength)
	require.Equal(t, "iggy-connect-sink-stdout", v1.Consumers[0].ConsumerGroup)
	require.Equal(t, true, v1.PluginConfig["print_payload"])
	info, err := os.Stat(v1.File)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "connector files may hold credentials")

	v2, err := s.CreateTOML(ctx, []byte(strings.Replace(sinkV0, `name = "printer"`, `name = "printer v2"`, 1)))
	require.NoError(t, err)
	require.Equal(t, uint64(2), v2.Version, "the version in the TOML is replaced by the next one")
	require.Equal(t, "printer v2", v2.Name)

	// Without a recorded choice the highest version is active.
	vs, err := s.Versions(ctx, KindSink, "stdout")
	require.NoError(t, err)
	require.Equal(t, []uint64{0, 1, 2}, versionsOf(vs))
	require.Equal(t, []bool{false, false, true}, activeOf(vs))
	act, err := s.Active(ctx, KindSink, "stdout")
	require.NoError(t, err)
	require.Equal(t, uint64(2), act.Version)

	// Activate version 1.
	require.NoError(t, s.SetActive(ctx, KindSink, "stdout", 1))
	data, err := os.ReadFile(filepath.Join(dir, ActiveVersionsFile))
	require.NoError(t, err)
	require.Contains(t, string(data), "[sinks]\nstdout = 1\n")
	act, err = s.Active(ctx, KindSink, "stdout")
	require.NoError(t, err)
	require.Equal(t, "printer v1", act.Name)

	// The active version cannot be deleted; others can.
	err = s.Delete(ctx, KindSink, "stdout", 1)
	require.ErrorIs(t, err, ErrActiveVersion)
	require.Contains(t, err.Error(), "recorded as active in .active_versions.toml")
	require.NoError(t, s.Delete(ctx, KindSink, "stdout", 0))
	_, err = s.Get(ctx, KindSink, "stdout", 0)
	require.ErrorIs(t, err, ErrNotFound)
	require.NoFileExists(t, filepath.Join(dir, "stdout_sink.toml"))
	require.ErrorIs(t, s.Delete(ctx, KindSink, "stdout", 7), ErrNotFound)
	require.ErrorIs(t, s.SetActive(ctx, KindSink, "stdout", 7), ErrNotFound)

	// A new Store on the same directory (a restart) sees the same state.
	s2, err := OpenStore(dir, noEnv)
	require.NoError(t, err)
	vs, err = s2.Versions(ctx, KindSink, "stdout")
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2}, versionsOf(vs))
	require.Equal(t, []bool{true, false}, activeOf(vs))
	set, err := s2.Load(ctx)
	require.NoError(t, err)
	require.Empty(t, set.Errors)
	require.Len(t, set.Connectors, 1)
	require.Equal(t, uint64(1), set.Connectors[0].Version)

	// Creating after a delete never reuses a live number.
	v3, err := s2.Create(ctx, v2)
	require.NoError(t, err)
	require.Equal(t, uint64(3), v3.Version)

	// With no recorded choice, the highest version cannot be deleted.
	fresh := t.TempDir()
	writeFile(t, fresh, "a.toml", sinkV0)
	writeFile(t, fresh, "b.toml", strings.Replace(sinkV0, "version = 0", "version = 4", 1))
	s3, err := OpenStore(fresh, noEnv)
	require.NoError(t, err)
	err = s3.Delete(ctx, KindSink, "stdout", 4)
	require.ErrorIs(t, err, ErrActiveVersion)
	require.Contains(t, err.Error(), "the highest version")

	_, err = s3.Versions(ctx, KindSource, "nope")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = s3.Active(ctx, KindSource, "nope")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = s3.Versions(ctx, KindSource, "../etc")
	require.ErrorIs(t, err, ErrInvalid)
}

func versionsOf(vs []VersionInfo) []uint64 {
	out := make([]uint64, len(vs))
	for i, v := range vs {
		out[i] = v.Version
	}
	return out
}

func activeOf(vs []VersionInfo) []bool {
	out := make([]bool, len(vs))
	for i, v := range vs {
		out[i] = v.Active
	}
	return out
}

func TestStoreCreateValidates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := OpenStore(dir, noEnv)
	require.NoError(t, err)
	ctx := t.Context()

	_, err = s.Create(ctx, &Connector{Type: KindSink, Key: "pg", Consumers: []ConsumerStream{{Stream: "s"}}})
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "sink_pg_0.toml")
	require.Contains(t, err.Error(), "streams[0].topics: expected at least one topic")

	_, err = s.CreateTOML(ctx, []byte("type = \"sink\"\nkey = \"pg\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nbatch_length = \"x\"\n"))
	require.ErrorContains(t, err, "new connector version:6: streams[0].batch_length: expected a non-negative integer")

	_, err = s.Create(ctx, &Connector{Type: KindSink, Key: "../../etc/passwd"})
	require.ErrorIs(t, err, ErrInvalid)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing is written when validation fails")

	// Environment overrides apply to what is read, not to what is saved.
	env := WithEnv(MapEnv(map[string]string{"IGGY_CONNECTORS_SINK_PG_PLUGIN_CONFIG_PASSWORD": "from-env"}))
	s2, err := OpenStore(dir, env)
	require.NoError(t, err)
	c, err := s2.CreateTOML(ctx, []byte("type = \"sink\"\nkey = \"pg\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n[plugin_config]\npassword = \"file\"\n"))
	require.NoError(t, err)
	require.Equal(t, "from-env", c.PluginConfig["password"])
	data, err := os.ReadFile(c.File)
	require.NoError(t, err)
	require.Contains(t, string(data), `password = "file"`)
	require.NotContains(t, string(data), "from-env")
}

func TestStoreActiveVersionsFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	writeFile(t, dir, "a.toml", sinkV0)
	writeFile(t, dir, "b.toml", strings.Replace(sinkV0, "version = 0", "version = 1", 1))
	// upstream's format, written by upstream's runtime
	writeFile(t, dir, ActiveVersionsFile, "[sinks]\nstdout = 0\n\n[sources]\n")
	s, err := OpenStore(dir, noEnv)
	require.NoError(t, err)
	set, err := s.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(0), set.Get(KindSink, "stdout").Version)

	// An active version that does not exist is reported for the connector.
	writeFile(t, dir, ActiveVersionsFile, "[sinks]\nstdout = 9\n")
	set, err = s.Load(ctx)
	require.NoError(t, err)
	require.Empty(t, set.Connectors)
	require.Len(t, set.Errors, 1)
	require.Equal(t, "stdout", set.Errors[0].Key)
	require.Contains(t, set.Errors[0].Error(), "active version 9 does not exist (versions: 0, 1)")

	// A malformed file fails the load.
	writeFile(t, dir, ActiveVersionsFile, "[sinks]\nstdout = \"one\"\n")
	_, err = s.Load(ctx)
	require.ErrorContains(t, err, ".active_versions.toml: invalid")
	writeFile(t, dir, ActiveVersionsFile, "[pipes]\nx = 1\n")
	_, err = s.Load(ctx)
	require.ErrorContains(t, err, "unknown key pipes")
}

func TestStoreDuplicateVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "a.toml", sinkV0)
	writeFile(t, dir, "b.toml", sinkV0)
	s, err := OpenStore(dir, noEnv)
	require.NoError(t, err)
	set, err := s.Load(t.Context())
	require.NoError(t, err)
	require.Len(t, set.Connectors, 1)
	require.Equal(t, filepath.Join(dir, "a.toml"), set.Connectors[0].File)
	require.Len(t, set.Errors, 1)
	require.Contains(t, set.Errors[0].Error(), "version 0 of sink \"stdout\" is also defined in a.toml")
}

func TestStoreEnvWarnings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "a.toml", sinkV0)
	s, err := OpenStore(dir, WithEnv(MapEnv(map[string]string{
		"IGGY_CONNECTORS_SINK_STDOUT_ENABLD":                      "true",
		"IGGY_CONNECTORS_SINK_STDOUT_PLUGIN_CONFIG_ANYTHING":      "1",
		"IGGY_CONNECTORS_SINK_STDOUT_STREAMS_0_CONSUMER_GROUP":    "g",
		"IGGY_CONNECTORS_SOURCE_ELSEWHERE_PLUGIN_CONFIG_PASSWORD": "x",
	})))
	require.NoError(t, err)
	set, err := s.Load(t.Context())
	require.NoError(t, err)
	require.Len(t, set.Warnings, 2, "%v", set.Warnings)
	require.Contains(t, set.Warnings[0], "IGGY_CONNECTORS_SINK_STDOUT_ENABLD addresses no key of a loaded connector")
	require.Contains(t, set.Warnings[0], "did you mean IGGY_CONNECTORS_SINK_STDOUT_ENABLED?")
	require.Contains(t, set.Warnings[1], "IGGY_CONNECTORS_SOURCE_ELSEWHERE_PLUGIN_CONFIG_PASSWORD")
	require.Equal(t, "g", set.Connectors[0].Consumers[0].ConsumerGroup)
}

func TestOpenStore(t *testing.T) {
	t.Parallel()
	_, err := OpenStore("", noEnv)
	require.ErrorIs(t, err, ErrInvalid)
	dir := filepath.Join(t.TempDir(), "not", "here")
	_, err = OpenStore(dir, noEnv)
	require.ErrorContains(t, err, "connectors.config_dir "+dir+": ")
	require.ErrorContains(t, err, "create it, or point config_dir at the directory of your connector files")
	require.NoDirExists(t, dir, "a missing config_dir is not made up")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	s, err := OpenStore(dir, noEnv)
	require.NoError(t, err)
	set, err := s.Load(t.Context())
	require.NoError(t, err)
	require.Empty(t, set.Connectors)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
}

// With a run directory, config_dir is only read: what is created at run
// time (versions, active versions) goes to the run directory, and both
// are read back as one.
func TestStoreRunDirectory(t *testing.T) {
	t.Parallel()
	conf, run := t.TempDir(), filepath.Join(t.TempDir(), "state", "connectors")
	require.NoError(t, os.WriteFile(filepath.Join(conf, "out.toml"), []byte(sinkV0), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(conf, ActiveVersionsFile), []byte("[sinks]\nstdout = 0\n"), 0o644))
	before := dirListing(t, conf)
	s, err := OpenStore(conf, noEnv, WithRunDir(run))
	require.NoError(t, err)
	ctx := t.Context()

	c, err := s.Active(ctx, KindSink, "stdout")
	require.NoError(t, err)
	v1, err := s.Create(ctx, c)
	require.NoError(t, err)
	require.Equal(t, uint64(1), v1.Version)
	require.Equal(t, run, filepath.Dir(v1.File))
	a, err := s.Active(ctx, KindSink, "stdout")
	require.NoError(t, err)
	require.Equal(t, uint64(0), a.Version, "config_dir's active version still applies")
	require.NoError(t, s.SetActive(ctx, KindSink, "stdout", 1))
	a, err = s.Active(ctx, KindSink, "stdout")
	require.NoError(t, err)
	require.Equal(t, uint64(1), a.Version, "the run directory's choice wins")
	vs, err := s.Versions(ctx, KindSink, "stdout")
	require.NoError(t, err)
	require.Len(t, vs, 2)
	require.Equal(t, before, dirListing(t, conf), "config_dir is not written")
	require.FileExists(t, filepath.Join(run, ActiveVersionsFile))

	// A new connector lives in the run directory alone.
	hook := strings.Replace(sinkV0, `key = "stdout"`, `key = "hook-x"`, 1)
	hc, err := ParseConnector("hook.toml", []byte(hook), noEnv)
	require.NoError(t, err)
	_, err = s.Create(ctx, hc)
	require.NoError(t, err)
	set, err := s.Load(ctx)
	require.NoError(t, err)
	require.Len(t, set.Connectors, 2)
	require.NoError(t, s.DeleteConnector(ctx, KindSink, "hook-x"))
	require.Equal(t, before, dirListing(t, conf))

	// Deleting a connector of config_dir is an explicit request: its
	// files and entries go from both directories.
	require.NoError(t, s.DeleteConnector(ctx, KindSink, "stdout"))
	set, err = s.Load(ctx)
	require.NoError(t, err)
	require.Empty(t, set.Connectors)
	require.Empty(t, set.Errors)
}

func dirListing(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = string(data)
	}
	return out
}

func TestStoreCreatedAt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := writeFile(t, dir, "a.toml", sinkV0)
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	require.NoError(t, os.Chtimes(p, when, when))
	s, err := OpenStore(dir, noEnv)
	require.NoError(t, err)
	vs, err := s.Versions(t.Context(), KindSink, "stdout")
	require.NoError(t, err)
	require.Equal(t, when, vs[0].CreatedAt)
}

func TestStoreConcurrentCreates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := OpenStore(dir, noEnv)
	require.NoError(t, err)
	base, err := ParseConnector("b.toml", []byte(sinkV0), noEnv)
	require.NoError(t, err)
	const n = 8
	got := make(chan uint64, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			c, err := s.Create(t.Context(), base)
			if err != nil {
				errs <- err
				return
			}
			got <- c.Version
		}()
	}
	seen := map[uint64]bool{}
	for range n {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case v := <-got:
			require.False(t, seen[v], "version %d given twice", v)
			seen[v] = true
		}
	}
	vs, err := s.Versions(t.Context(), KindSink, "stdout")
	require.NoError(t, err)
	require.Equal(t, []uint64{0, 1, 2, 3, 4, 5, 6, 7}, versionsOf(vs))
}
