package transform

import (
	"errors"
	"path/filepath"
	"sync"

	"github.com/ferryhq/ferry/connector"
)

// The plugin transform runs a transform plugin (a process speaking the
// Transform service of plugin/proto/ferry/plugin/v1/plugin.proto; see
// docs/plugins.md), one call per batch:
//
//	[transforms.plugin]
//	path = "plugins/redact"    # a ferry-plugin.toml, its directory or an executable
//	[transforms.plugin.config] # checked against the plugin's spec
//	field = "email"
//
// Package transform does not start processes itself: plugin/host, which
// cmd/ferry imports, installs the builder (SetPluginBuilder). The plugin's
// process is supervised as a connector plugin's is (deadline per call,
// restart with backoff); a batch it could not answer fails with an error
// marked connector.Unavailable, which the runtime retries rather than
// dead-letters.

// PluginBuilder makes the transform of the plugin at path (already made
// absolute) with its config table; where names the table for errors.
type PluginBuilder func(path string, config map[string]any, where string) (BatchTransform, error)

var pluginBuilder struct {
	sync.Mutex
	build PluginBuilder
}

// SetPluginBuilder installs what builds plugin transforms.
func SetPluginBuilder(b PluginBuilder) {
	pluginBuilder.Lock()
	pluginBuilder.build = b
	pluginBuilder.Unlock()
}

var pluginSpec = connector.NewSpec(
	connector.NewStringField("path").Require().WithCheck(nonEmpty).WithExample("plugins/redact").
		WithDoc("the plugin: a ferry-plugin.toml, its directory or an executable, relative to the configuration file"),
	connector.NewAnyField("config").WithCheck(isTable).
		WithDoc("the plugin's settings, checked against its spec"),
)

func newPlugin(b *buildContext) (Transform, error) {
	set, err := pluginSpec.Parse(b.cfg)
	if err != nil {
		return nil, err
	}
	pluginBuilder.Lock()
	build := pluginBuilder.build
	pluginBuilder.Unlock()
	if build == nil {
		return nil, set.Errorf("path", "%v", errors.New("plugin transforms need the plugin host (plugin/host), which this program does not include"))
	}
	path := set.String("path")
	if !filepath.IsAbs(path) && b.baseDir != "" {
		path = filepath.Join(b.baseDir, path)
	}
	cfg, _ := set.Value("config").(map[string]any)
	t, err := build(path, cfg, b.where())
	if err != nil {
		return nil, set.Errorf("path", "%v", err)
	}
	return t, nil
}
