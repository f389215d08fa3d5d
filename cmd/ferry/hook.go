package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/exec"
	httpsink "github.com/ferryhq/ferry/connectors/http"
	"github.com/ferryhq/ferry/internal/envx"
	"github.com/ferryhq/ferry/sysevents"
	"github.com/spf13/cobra"
)

// Hooks are exec sinks managed through the runtime's API. A hook named
// NAME is the sink with key "hook-NAME" and path "exec", reading with
// consumer group "hook-NAME".
const (
	hookPrefix        = "hook-"
	hookDefaultStream = "hooks"
	hookPollInterval  = "100ms"
)

func hookKey(name string) string { return hookPrefix + name }

// isHook tells hooks from other sinks: a command hook is an exec sink, a
// --webhook hook an http sink.
func isHook(key, path string) bool {
	return strings.HasPrefix(key, hookPrefix) && (path == "exec" || path == "http")
}

func checkHookName(name string) error {
	if name == "" || !config.ValidKey(hookKey(name)) || !config.ValidKey(name) {
		return usageError{fmt.Errorf("hook name %q: want 1 to %d letters, digits, '-', '_' or '.', starting with a letter or digit", name, 128-len(hookPrefix))}
	}
	return nil
}

func newHookCmd() *cobra.Command {
	f := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "Run a command for every message on a topic",
		Long: `A hook runs a shell command for each message on a topic, through a running
runtime (ferry run) and its management API. Hooks are exec sinks: their
configuration is stored in the runtime's state directory (<state
path>/connectors, never in config_dir), so they survive restarts, and they
start at once, without restarting the runtime.

Placeholders {payload} {offset} {stream} {topic} {partition} {id} {timestamp}
in COMMAND are passed as data (quoted references to FERRY_* variables), never
spliced into the shell text; the payload is also on standard input. A failing
command is retried (--max-retries), then sent to the dead-letter topic
<stream>/hook-NAME_dead_letter (or, with --on-error stop, stops the hook).
A new hook starts at the first message the topic holds (a hook created again
under the same name goes on where its consumer group hook-NAME stopped).

The API needs a credential, since a hook runs commands: a runtime without
[http] api_key writes a local token that only its user can read, and ferry
commands of that user send it by themselves; with api_key, pass the key with
--api-key or $FERRY_API_KEY (or the runtime's config.toml with --config).
Commands do not see the runtime's Ferry and Iggy secrets (IGGY_CONNECTORS_*,
IGGY_PASSWORD, IGGY_TOKEN, FERRY_*).`,
	}
	f.register(cmd)
	cmd.AddCommand(newHookCreateCmd(f), newHookListCmd(f), newHookGetCmd(f), newHookDeleteCmd(f), newHookLogsCmd(f))
	return cmd
}

// hookOptions are the flags of hook create.
type hookOptions struct {
	stream, dir, timeout, shell, onError string
	deadLetterStream                     string // default: stream
	from, ordering                       string
	webhook, signing, secretEnv          string
	on                                   string // an event type: the hook is a trigger
	perBatch                             bool
	env                                  []string
	maxRetries                           uint32
	concurrency                          int
}

func newHookCreateCmd(f *apiFlags) *cobra.Command {
	o := &hookOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME (TOPIC | --on EVENT) (COMMAND | --webhook URL)",
		Short: "Create a hook and start it",
		Example: `  ferry hook create my-first-hook my-topic "php artisan execute:command {payload}"
  ferry hook create invoices created 'cd /srv/app; ./bin/invoice --id {id}' --stream orders --timeout 30s --env APP_ENV=production
  ferry hook create notify orders --webhook https://example.com/hooks/orders --secret-env ORDERS_HOOK_SECRET
  ferry hook create cleanup --on segment.deleted 'echo {payload} >> /var/log/segments'`,
		Args: func(cmd *cobra.Command, args []string) error {
			want := 3
			if o.on != "" {
				want-- // no TOPIC: the event type's
			}
			if o.webhook != "" {
				if len(args) == want {
					return usageError{errors.New("give COMMAND or --webhook URL, not both")}
				}
				want--
			}
			return exactArgs(want)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if o.on != "" {
				if cmd.Flags().Changed("stream") {
					return usageError{errors.New("--on names the stream and topic itself; leave out --stream")}
				}
				trig, err := sysevents.TriggerFor(o.on)
				if err != nil {
					return usageError{fmt.Errorf("--on: %w", err)}
				}
				o.stream, o.deadLetterStream = trig.Stream, hookDefaultStream
				args = append([]string{args[0], trig.Topic}, args[1:]...)
				if trig.Origin == sysevents.OriginBroker {
					defer fmt.Fprintf(cmd.ErrOrStderr(), "note: %s events are published by Ferry's embedded broker (ferry run's or ferry serve's); an external Iggy server has none\n", o.on)
				}
			}
			var body *hookBody
			if o.webhook != "" {
				body, err = o.webhookConfig(args[0], args[1])
			} else {
				body, err = o.config(args[0], args[1], args[2])
			}
			if err != nil {
				return err
			}
			h, err := createHook(cmd.Context(), c, args[0], body)
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), h)
			}
			out := cmd.OutOrStdout()
			if h.URL != "" {
				fmt.Fprintf(out, "hook %s created: sends each message on %s/%s to %s (status %s)\n", h.Name, h.Stream, h.Topic, h.URL, h.Status)
			} else {
				fmt.Fprintf(out, "hook %s created: runs `%s` for each message on %s/%s (status %s)\n", h.Name, oneLineText(h.Command, 200), h.Stream, h.Topic, h.Status)
			}
			if h.DeadLetter != "" {
				fmt.Fprintf(out, "failed messages go to %s after %d retries\n", h.DeadLetter, h.MaxRetries)
			}
			fmt.Fprintf(out, "send it a test message: %s\n", sendCommand(h))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.stream, "stream", hookDefaultStream, "the stream TOPIC is in (with the embedded broker, created when missing)")
	fl.StringVar(&o.dir, "dir", "", "working directory of the command, made absolute here (default: the runtime's)")
	fl.StringVar(&o.timeout, "timeout", "", `time limit of each run, such as "30s"; its process group is killed (default 1m; 0 for none)`)
	fl.StringArrayVar(&o.env, "env", nil, "extra environment variable K=V for the command (repeatable)")
	fl.StringVar(&o.shell, "shell", "", "shell that runs COMMAND with -c (default /bin/sh)")
	fl.StringVar(&o.onError, "on-error", "dead_letter", `after the retries: "dead_letter" (go on) or "stop" (stop the hook)`)
	fl.Uint32Var(&o.maxRetries, "max-retries", config.DefaultMaxRetries, "retries of a failing command")
	fl.IntVar(&o.concurrency, "concurrency", 1, "commands running at once; above 1, messages may finish out of order (with --ordering key: keys at once)")
	fl.StringVar(&o.on, "on", "", "instead of TOPIC: run for each event of this type (a trigger), such as segment.deleted or connector.status_changed; the payload is the CloudEvent")
	fl.StringVar(&o.webhook, "webhook", "", "instead of COMMAND: send each message to this URL (an http sink), signed when --secret-env is given, retried, dead-lettered")
	fl.StringVar(&o.signing, "signing", "standard-webhooks", `with --webhook: "standard-webhooks" (webhook-id, webhook-timestamp, webhook-signature; the secret is whsec_<base64>) or "ferry"`)
	fl.StringVar(&o.secretEnv, "secret-env", "", "with --webhook: the environment variable of the runtime that holds the signing secret (the secret itself never leaves the runtime)")
	fl.BoolVar(&o.perBatch, "per-batch", false, "with --webhook: one request per batch (NDJSON) instead of one per message")
	fl.StringVar(&o.from, "from", "first", `where a new hook starts: "first" (the oldest message the topic holds), "now" (only messages sent from now on) or an offset`)
	fl.StringVar(&o.ordering, "ordering", "partition", `"partition" (one message at a time per partition), "key" (in order per message key, keys in parallel up to --concurrency, a failing key holding up only itself) or "none"`)
	return cmd
}

// exactArgs is cobra.ExactArgs as a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{fmt.Errorf("%w (usage: ferry %s)", err, cmd.UseLine()[len("ferry "):])}
		}
		return nil
	}
}

// hookBody is upstream's CreateSinkConfig for a hook.
type hookBody struct {
	Enabled      bool           `json:"enabled"`
	Name         string         `json:"name"`
	Path         string         `json:"path"`
	Streams      []sinkStream   `json:"streams"`
	PluginConfig map[string]any `json:"plugin_config"`
}

// config checks the arguments and builds the configuration, validating
// it with the exec sink's own rules before anything is sent.
func (o *hookOptions) config(name, topic, command string) (*hookBody, error) {
	if err := checkHookName(name); err != nil {
		return nil, err
	}
	if strings.TrimSpace(topic) == "" || strings.TrimSpace(o.stream) == "" {
		return nil, usageError{errors.New("TOPIC and --stream must not be empty")}
	}
	if o.onError != string(config.PolicyDeadLetter) && o.onError != string(config.PolicyStop) {
		return nil, usageError{fmt.Errorf("--on-error %q: want dead_letter or stop", o.onError)}
	}
	if o.concurrency < 1 {
		return nil, usageError{fmt.Errorf("--concurrency %d: want 1 or more", o.concurrency)}
	}
	if _, err := config.ParseStartFrom(o.from); err != nil {
		return nil, usageError{fmt.Errorf("--from: %w", err)}
	}
	if o.ordering == "" {
		o.ordering = string(config.OrderPartition)
	}
	switch config.Ordering(o.ordering) {
	case config.OrderPartition, config.OrderKey, config.OrderNone:
	default:
		return nil, usageError{fmt.Errorf("--ordering %q: want partition, key or none", o.ordering)}
	}
	pc := map[string]any{"command": command}
	if o.dir != "" {
		dir, err := filepath.Abs(o.dir) // relative to where the user is, not to the runtime
		if err != nil {
			return nil, usageError{fmt.Errorf("--dir %q: %w", o.dir, err)}
		}
		pc["working_dir"] = dir
	}
	switch o.timeout {
	case "":
	case "0":
		pc["timeout"] = "0s"
	default:
		pc["timeout"] = o.timeout
	}
	if o.shell != "" {
		pc["shell"] = o.shell
	}
	batch := uint32(1) // strict order: a failing message is retried before the next runs
	stream := sinkStream{}
	switch {
	case o.ordering != string(config.OrderPartition):
		// The runtime runs lanes (one key, or one lane, per Consume) up to
		// --concurrency at once; each runs its messages one by one.
		stream.Ordering, stream.Concurrency = o.ordering, o.concurrency
		pc["concurrency"] = o.concurrency
	case o.concurrency > 1:
		pc["concurrency"], pc["ordering"] = o.concurrency, exec.OrderingNone
		batch = uint32(o.concurrency)
	}
	if o.from != "first" {
		stream.StartFrom = o.from // "" is "first" too
	}
	if len(o.env) > 0 {
		env := map[string]any{}
		for _, kv := range o.env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, usageError{fmt.Errorf("--env %q: want NAME=VALUE", kv)}
			}
			env[k] = v
		}
		pc["env"] = env
	}
	if _, err := exec.New(connector.Config{Key: hookKey(name), Plugin: connector.PluginConfig{Values: pc, Source: "hook " + name}}); err != nil {
		return nil, usageError{err}
	}
	retries := o.maxRetries
	stream.Stream, stream.Topics, stream.Schema, stream.BatchLength = o.stream, []string{topic}, string(config.SchemaRaw), batch
	stream.PollInterval, stream.ConsumerGroup, stream.MaxRetries, stream.OnError = hookPollInterval, hookKey(name), &retries, o.onError
	if o.deadLetterStream != "" && o.onError == string(config.PolicyDeadLetter) {
		stream.DeadLetterStream = o.deadLetterStream // a trigger's failures go to the hooks stream, not the system stream
	}
	return &hookBody{Enabled: true, Name: name, Path: "exec", PluginConfig: pc, Streams: []sinkStream{stream}}, nil
}

// createHook creates and starts a hook (createManaged).
func createHook(ctx context.Context, c *apiClient, name string, body *hookBody) (*hookView, error) {
	return createManaged(ctx, c, managed{"sinks", hookKey(name), "hook " + name, "ferry hook delete " + name}, body,
		func() (*hookView, error) { return getHook(ctx, c, name) },
		func(h *hookView) (string, string) { return h.Status, h.LastError })
}

// hookView is a hook as hook get and hook list show it.
type hookView struct {
	Name          string            `json:"name"`
	Key           string            `json:"key"`
	Status        string            `json:"status"`
	LastError     string            `json:"last_error,omitempty"`
	Enabled       bool              `json:"enabled"`
	Version       uint64            `json:"version"`
	Stream        string            `json:"stream"`
	Topic         string            `json:"topic"`
	ConsumerGroup string            `json:"consumer_group"`
	Command       string            `json:"command,omitempty"`
	URL           string            `json:"url,omitempty"`     // a --webhook hook's
	Signing       string            `json:"signing,omitempty"` // and its signing scheme, when signed
	WorkingDir    string            `json:"working_dir,omitempty"`
	Timeout       string            `json:"timeout,omitempty"`
	Shell         string            `json:"shell,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Concurrency   int               `json:"concurrency,omitempty"`
	MaxRetries    uint32            `json:"max_retries"`
	OnError       string            `json:"on_error"`
	DeadLetter    string            `json:"dead_letter,omitempty"`
	Ordering      string            `json:"ordering,omitempty"`
	StartFrom     string            `json:"start_from,omitempty"`
	// Counters from /stats.
	Consumed     uint64 `json:"messages_consumed"`
	Processed    uint64 `json:"messages_processed"`
	Errors       uint64 `json:"errors"`
	DeadLettered uint64 `json:"messages_dead_lettered"`
	// IggyAddress is where to send messages to the hook's topic.
	IggyAddress string `json:"iggy_address,omitempty"`
}

func viewOf(info sinkInfo, c *sinkConfig) *hookView {
	h := &hookView{Name: strings.TrimPrefix(info.Key, hookPrefix), Key: info.Key, Status: info.Status, Enabled: info.Enabled}
	if info.LastError != nil {
		h.LastError = info.LastError.Message
	}
	if c == nil {
		return h
	}
	h.Version, h.Enabled = c.Version, c.Enabled
	if len(c.Streams) > 0 {
		s := c.Streams[0]
		h.Stream, h.Topic, h.ConsumerGroup, h.OnError = s.Stream, strings.Join(s.Topics, ","), s.ConsumerGroup, s.OnError
		h.Ordering, h.StartFrom = s.Ordering, s.StartFrom
		h.MaxRetries = config.DefaultMaxRetries // the API leaves out default delivery keys
		if s.MaxRetries != nil {
			h.MaxRetries = *s.MaxRetries
		}
		if s.OnError == string(config.PolicyDeadLetter) {
			h.DeadLetter = s.DeadLetterStream + "/" + s.DeadLetterTopic
		}
	}
	str := func(k string) string { v, _ := c.PluginConfig[k].(string); return v }
	h.Command, h.WorkingDir, h.Timeout, h.Shell = str("command"), str("working_dir"), str("timeout"), str("shell")
	if h.URL = str("url"); h.URL != "" && str("signing_secret") != "" {
		h.Signing = str("signing")
		if h.Signing == "" {
			h.Signing = "ferry"
		}
	}
	if n, ok := c.PluginConfig["concurrency"].(float64); ok {
		h.Concurrency = int(n)
	}
	if env, ok := c.PluginConfig["env"].(map[string]any); ok {
		h.Env = map[string]string{}
		for k, v := range env {
			h.Env[k] = fmt.Sprint(v)
		}
	}
	return h
}

func getHook(ctx context.Context, c *apiClient, name string) (*hookView, error) {
	key := url.PathEscape(hookKey(name))
	var info sinkInfo
	if err := c.call(ctx, "GET", "/sinks/"+key, nil, &info); err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("hook %s does not exist (ferry hook list shows the hooks)", name)
		}
		return nil, err
	}
	if !isHook(info.Key, info.Path) {
		return nil, fmt.Errorf("sink %s is not a hook (its path is %q, not \"exec\")", info.Key, info.Path)
	}
	var h *hookView
	var cfg sinkConfig
	if err := c.call(ctx, "GET", "/sinks/"+key+"/configs/active", nil, &cfg); err != nil {
		if !isNotFound(err) {
			return nil, err
		}
		h = viewOf(info, nil)
	} else {
		h = viewOf(info, &cfg)
	}
	st, err := c.stats(ctx)
	if err != nil {
		return nil, err
	}
	if s, ok := st.find("sink", info.Key); ok {
		h.Consumed, h.Processed, h.Errors, h.DeadLettered = deref(s.Consumed), deref(s.Processed), s.Errors, s.DeadLettered
	}
	h.IggyAddress = st.IggyAddress
	return h, nil
}

func newHookListCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the hooks",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			hooks, err := listManaged(cmd.Context(), c, "sinks", hookPrefix, isHook,
				func(name string) (*hookView, error) { return getHook(cmd.Context(), c, name) })
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), hooks)
			}
			if len(hooks) == 0 {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "no hooks (create one with: ferry hook create NAME TOPIC COMMAND)")
				return err
			}
			rows := make([][]string, 0, len(hooks))
			for _, h := range hooks {
				rows = append(rows, []string{h.Name, h.Status, h.Stream + "/" + h.Topic, oneLineText(h.Command, 60)})
			}
			return table(cmd.OutOrStdout(), "NAME\tSTATUS\tTOPIC\tCOMMAND", rows)
		},
	}
}

func newHookGetCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Show a hook: its status, last error and configuration",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := checkHookName(args[0]); err != nil {
				return err
			}
			h, err := getHook(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), h)
			}
			return printHook(cmd.OutOrStdout(), h)
		},
	}
}

func printHook(w io.Writer, h *hookView) error {
	rows := [][]string{
		{"name", h.Name}, {"status", h.Status}, {"last error", h.LastError},
		{"topic", h.Stream + "/" + h.Topic}, {"command", h.Command}, {"url", h.URL}, {"signing", h.Signing}, {"working dir", h.WorkingDir},
		{"timeout", h.Timeout}, {"shell", h.Shell}, {"consumer group", h.ConsumerGroup},
		{"on error", fmt.Sprintf("%s after %d retries", h.OnError, h.MaxRetries)}, {"dead letter", h.DeadLetter},
		{"messages", fmt.Sprintf("%d consumed, %d processed, %d errors, %d dead-lettered", h.Consumed, h.Processed, h.Errors, h.DeadLettered)},
		{"test message", sendCommand(h)},
		{"sink key", h.Key}, {"version", strconv.FormatUint(h.Version, 10)},
	}
	if h.Concurrency > 1 {
		rows = append(rows, []string{"concurrency", strconv.Itoa(h.Concurrency)})
	}
	rows = append(rows, []string{"ordering", h.Ordering}, []string{"start from", h.StartFrom})
	keys := make([]string, 0, len(h.Env))
	for k := range h.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rows = append(rows, []string{"env", k + "=" + h.Env[k]})
	}
	for _, r := range rows {
		if r[1] == "" {
			continue
		}
		if _, err := fmt.Fprintf(w, "%-15s %s\n", r[0]+":", r[1]); err != nil {
			return err
		}
	}
	return nil
}

// sendCommand is the ferry command that sends a message to the hook's
// topic, with --address when the broker is not where the CLI looks.
func sendCommand(h *hookView) string {
	cmd := "ferry message send " + shellWord(h.Stream) + " " + shellWord(h.Topic) + " 'hello from ferry'"
	if h.IggyAddress != "" && h.IggyAddress != config.DefaultEmbeddedAddress {
		cmd += " --address " + h.IggyAddress
	}
	return cmd
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func newHookDeleteCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Stop a hook and delete its configuration",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			name := args[0]
			if err := checkHookName(name); err != nil {
				return err
			}
			key := url.PathEscape(hookKey(name))
			var cfg sinkConfig
			if err := c.call(cmd.Context(), "GET", "/sinks/"+key+"/configs/active", nil, &cfg); err == nil && cfg.Path != "exec" {
				return fmt.Errorf("sink %s is not a hook (its path is %q, not \"exec\")", hookKey(name), cfg.Path)
			}
			if err := c.call(cmd.Context(), "DELETE", "/sinks/"+key, nil, nil); err != nil {
				if isNotFound(err) {
					return fmt.Errorf("hook %s does not exist (ferry hook list shows the hooks)", name)
				}
				return fmt.Errorf("delete hook %s: %w", name, err)
			}
			return done(cmd.OutOrStdout(), f.json, "hook %s deleted", name)
		},
	}
}

// oneLineText shortens s to one line of at most n runes for a table.
func oneLineText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// webhookConfig builds a --webhook hook: an http sink that sends each
// message (or each batch, --per-batch) to the URL, signed with the secret
// in the runtime's environment variable --secret-env. The URL comes from
// the user, never from a message.
func (o *hookOptions) webhookConfig(name, topic string) (*hookBody, error) {
	body, err := o.config(name, topic, "true") // the checks and the stream every hook shares
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(o.webhook)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{fmt.Errorf("--webhook %q: want an http:// or https:// URL with a host", o.webhook)}
	}
	if o.signing != httpsink.SigningStandard && o.signing != httpsink.SigningFerry {
		return nil, usageError{fmt.Errorf("--signing %q: want %s or %s", o.signing, httpsink.SigningStandard, httpsink.SigningFerry)}
	}
	for _, flag := range []struct {
		name string
		set  bool
	}{{"--dir", o.dir != ""}, {"--shell", o.shell != ""}, {"--env", len(o.env) > 0}} {
		if flag.set {
			return nil, usageError{fmt.Errorf("%s is for command hooks, not --webhook", flag.name)}
		}
	}
	pc := map[string]any{"url": o.webhook, "batch_mode": httpsink.ModeIndividual, "include_metadata": true}
	if o.perBatch {
		pc["batch_mode"] = httpsink.ModeNDJSON
	}
	if o.timeout != "" && o.timeout != "0" {
		pc["timeout"] = o.timeout
	}
	if o.secretEnv != "" {
		if !envx.ValidName(o.secretEnv) {
			return nil, usageError{fmt.Errorf("--secret-env %q: want an environment variable name", o.secretEnv)}
		}
		pc["signing"], pc["signing_secret"] = o.signing, "${"+o.secretEnv+"}"
	}
	body.Path, body.PluginConfig = "http", pc
	s := &body.Streams[0]
	if o.ordering == string(config.OrderPartition) && o.concurrency <= 1 {
		s.BatchLength = 100 // requests go out in order, a batch at a time
	}
	return body, nil
}
