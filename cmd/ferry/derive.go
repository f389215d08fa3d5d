package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/derive"
	"github.com/ferryhq/ferry/internal/envx"
	"github.com/spf13/cobra"
)

// Derived topics are derive sinks managed through the runtime's API. A
// derived topic named NAME is the sink with key "derive-NAME" and path
// "derive", reading with consumer group "derive-NAME";
// GET /views/NAME/{key} looks its groups up.
const derivePrefix = "derive-"

func deriveKey(name string) string { return derivePrefix + name }

func isDerive(key, path string) bool { return strings.HasPrefix(key, derivePrefix) && path == "derive" }

func checkDeriveName(name string) error {
	if name == "" || !config.ValidKey(deriveKey(name)) || !config.ValidKey(name) {
		return usageError{fmt.Errorf("derived topic name %q: want 1 to %d letters, digits, '-', '_' or '.', starting with a letter or digit", name, 128-len(derivePrefix))}
	}
	return nil
}

func newDeriveCmd() *cobra.Command {
	f := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "derive",
		Short: "Keep a keyed aggregation of topics in a changelog topic",
		Long: `A derived topic aggregates input topics per key (and per window of event
time) and writes each group's latest value to an output topic as a
changelog: one message per changed group, its key in the "key" header,
deletion markers when a group goes away. It runs in a running runtime
(ferry run) as a derive sink, created through the management API; its
configuration is stored in the runtime's state directory and survives
restarts.

Aggregates: count(*), count(F), sum(F), min(F), max(F), avg(F),
distinct_count(F), latest(F), latest(*) over JSON fields F, and
WebAssembly aggregates (--udaf). Each input message is counted once across
crashes; output updates have ids made of (name, key, window, version), so
a broker that deduplicates by id (ferry serve --dedup-max-entries) keeps
no duplicate either. ferry derive view NAME KEY looks a key up in the
current state (GET /views/NAME/KEY).`,
	}
	f.register(cmd)
	cmd.AddCommand(newDeriveCreateCmd(f), newDeriveListCmd(f), newDeriveGetCmd(f), newDeriveDeleteCmd(f), newDeriveViewCmd(f))
	return cmd
}

// deriveOptions are the flags of derive create.
type deriveOptions struct {
	from                             []string
	to, groupBy                      string
	aggs                             []string
	window, hop, lateness, eventTime string
	filter, late, udaf, stateDir     string
	username, passwordEnv, startFrom string
	retract                          bool
}

func newDeriveCreateCmd(f *apiFlags) *cobra.Command {
	o := &deriveOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME --from STREAM/TOPIC --to STREAM/TOPIC [--group-by FIELD] [--agg AGG]... [--window 1m]",
		Short: "Create a derived topic and start it",
		Example: `  ferry derive create orders_per_user --from shop/orders --group-by user --agg 'count(*)' --agg 'sum(amount)' --window 1m --to shop/orders_per_user
  ferry derive create latest_status --from shop/orders --agg 'latest(status)' --to shop/order_status`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			name := args[0]
			if err := checkDeriveName(name); err != nil {
				return err
			}
			st, err := c.stats(cmd.Context())
			if err != nil {
				return err
			}
			body, err := o.config(name, st.IggyAddress)
			if err != nil {
				return err
			}
			v, err := createDerive(cmd.Context(), c, name, body)
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), v)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "derived topic %s created: %s of %s into %s (status %s)\nlook a key up: ferry derive view %s KEY\n",
				v.Name, strings.Join(v.Aggregates, ", "), strings.Join(v.From, ", "), v.To, v.Status, v.Name)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&o.from, "from", nil, "an input topic STREAM/TOPIC (repeatable; the topics of one stream share its settings)")
	fl.StringVar(&o.to, "to", "", "the output topic STREAM/TOPIC (created with one partition when missing)")
	fl.StringVar(&o.groupBy, "group-by", "key", `"key" (the message's key header) or a JSON field path such as user.id`)
	fl.StringArrayVar(&o.aggs, "agg", nil, "an aggregate such as count(*) or sum(amount) (repeatable; default count(*))")
	fl.StringVar(&o.window, "window", "", `a window on event time, such as "1m" (default none: one group per key)`)
	fl.StringVar(&o.hop, "hop", "", "the start interval of hopping windows (default: tumbling windows)")
	fl.StringVar(&o.lateness, "allowed-lateness", "", `how late an event may come after its window's end, such as "30s"`)
	fl.StringVar(&o.eventTime, "event-time", "", "a JSON field with the event time (RFC 3339 or Unix ms; default the message's timestamp)")
	fl.StringVar(&o.filter, "filter", "", `a predicate over JSON fields, such as 'status = "paid" and amount > 0'`)
	fl.StringVar(&o.late, "late", "drop", `events past the lateness: "drop" or "dead_letter" (to <stream>/derive-NAME_dead_letter)`)
	fl.BoolVar(&o.retract, "retract", false, "a deletion marker for a window's group when the window closes")
	fl.StringVar(&o.udaf, "udaf", "", "a WebAssembly user-defined aggregate (.wasm), made absolute here")
	fl.StringVar(&o.stateDir, "state-dir", "", "where the checkpoint is kept (default <runtime state path>/derive/derive-NAME)")
	fl.StringVar(&o.username, "iggy-username", "", "the user the derive sink writes the output as (default iggy)")
	fl.StringVar(&o.passwordEnv, "iggy-password-env", "", "the runtime's environment variable holding that user's password (the password never leaves the runtime)")
	fl.StringVar(&o.startFrom, "start-from", "first", `where a new derived topic starts reading: "first", "now" or an offset`)
	return cmd
}

// config checks the flags and builds the sink's configuration, checked
// with the derive sink's own rules before anything is sent.
func (o *deriveOptions) config(name, iggyAddress string) (*hookBody, error) {
	if len(o.from) == 0 || o.to == "" {
		return nil, usageError{errors.New("--from STREAM/TOPIC and --to STREAM/TOPIC are required")}
	}
	if _, err := config.ParseStartFrom(o.startFrom); err != nil {
		return nil, usageError{fmt.Errorf("--start-from: %w", err)}
	}
	aggs := make([]any, 0, len(o.aggs))
	for _, a := range o.aggs {
		aggs = append(aggs, a)
	}
	if len(aggs) == 0 && o.udaf == "" {
		aggs = append(aggs, "count(*)")
	}
	pc := map[string]any{"to": o.to, "group_by": o.groupBy, "aggregates": aggs, "late": o.late}
	for k, v := range map[string]string{"window": o.window, "hop": o.hop, "allowed_lateness": o.lateness,
		"event_time": o.eventTime, "filter": o.filter, "username": o.username} {
		if v != "" {
			pc[k] = v
		}
	}
	if o.retract {
		pc["retract"] = true
	}
	if iggyAddress != "" {
		pc["address"] = iggyAddress
	}
	for flag, p := range map[string]*string{"--udaf": &o.udaf, "--state-dir": &o.stateDir} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p) // relative to where the user is, not to the runtime
		if err != nil {
			return nil, usageError{fmt.Errorf("%s %q: %w", flag, *p, err)}
		}
		*p = abs
	}
	if o.udaf != "" {
		pc["udaf"] = o.udaf
	}
	if o.stateDir != "" {
		pc["state_dir"] = o.stateDir
	}
	if o.passwordEnv != "" {
		if !envx.ValidName(o.passwordEnv) {
			return nil, usageError{fmt.Errorf("--iggy-password-env %q: want an environment variable name", o.passwordEnv)}
		}
		pc["password"] = "${" + o.passwordEnv + "}"
	}
	check := map[string]any{}
	for k, v := range pc {
		check[k] = v
	}
	delete(check, "password")                           // the runtime expands it; its value is not here
	check["state_dir"] = filepath.Join("check", "only") // not created: New only parses
	if _, err := derive.New(connector.Config{Key: deriveKey(name), Plugin: connector.PluginConfig{Values: check, Source: "derive " + name}}); err != nil {
		return nil, usageError{err}
	}
	byStream := map[string][]string{}
	var streams []string
	for _, from := range o.from {
		st, tp, ok := strings.Cut(from, "/")
		if !ok || st == "" || tp == "" || strings.Contains(tp, "/") {
			return nil, usageError{fmt.Errorf("--from %q: want STREAM/TOPIC", from)}
		}
		if _, seen := byStream[st]; !seen {
			streams = append(streams, st)
		}
		byStream[st] = append(byStream[st], tp)
	}
	body := &hookBody{Enabled: true, Name: name, Path: "derive", PluginConfig: pc}
	for _, st := range streams {
		s := sinkStream{Stream: st, Topics: byStream[st], Schema: string(config.SchemaJSON), BatchLength: 1000,
			PollInterval: hookPollInterval, ConsumerGroup: deriveKey(name), OnError: string(config.PolicyDeadLetter)}
		if o.startFrom != "first" {
			s.StartFrom = o.startFrom
		}
		body.Streams = append(body.Streams, s)
	}
	return body, nil
}

// createDerive creates and starts a derived topic (createManaged).
func createDerive(ctx context.Context, c *apiClient, name string, body *hookBody) (*deriveView, error) {
	return createManaged(ctx, c, managed{"sinks", deriveKey(name), "derived topic " + name, "ferry derive delete " + name}, body,
		func() (*deriveView, error) { return getDerive(ctx, c, name) },
		func(v *deriveView) (string, string) { return v.Status, v.LastError })
}

// deriveView is a derived topic as derive get and derive list show it.
type deriveView struct {
	Name       string   `json:"name"`
	Key        string   `json:"key"`
	Status     string   `json:"status"`
	LastError  string   `json:"last_error,omitempty"`
	Enabled    bool     `json:"enabled"`
	Version    uint64   `json:"version"`
	From       []string `json:"from"`
	To         string   `json:"to"`
	GroupBy    string   `json:"group_by"`
	Aggregates []string `json:"aggregates"`
	Window     string   `json:"window,omitempty"`
	Hop        string   `json:"hop,omitempty"`
	Lateness   string   `json:"allowed_lateness,omitempty"`
	EventTime  string   `json:"event_time,omitempty"`
	Filter     string   `json:"filter,omitempty"`
	Late       string   `json:"late,omitempty"`
	UDAF       string   `json:"udaf,omitempty"`
	Consumed   uint64   `json:"messages_consumed"`
	Processed  uint64   `json:"messages_processed"`
	Errors     uint64   `json:"errors"`
	Dead       uint64   `json:"messages_dead_lettered"`
}

func getDerive(ctx context.Context, c *apiClient, name string) (*deriveView, error) {
	key := url.PathEscape(deriveKey(name))
	var info sinkInfo
	if err := c.call(ctx, "GET", "/sinks/"+key, nil, &info); err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("derived topic %s does not exist (ferry derive list shows them)", name)
		}
		return nil, err
	}
	if !isDerive(info.Key, info.Path) {
		return nil, fmt.Errorf("sink %s is not a derived topic (its path is %q, not \"derive\")", info.Key, info.Path)
	}
	v := &deriveView{Name: name, Key: info.Key, Status: info.Status, Enabled: info.Enabled}
	if info.LastError != nil {
		v.LastError = info.LastError.Message
	}
	var cfg sinkConfig
	if err := c.call(ctx, "GET", "/sinks/"+key+"/configs/active", nil, &cfg); err == nil {
		v.Version, v.Enabled = cfg.Version, cfg.Enabled
		for _, s := range cfg.Streams {
			for _, t := range s.Topics {
				v.From = append(v.From, s.Stream+"/"+t)
			}
		}
		str := func(k string) string { s, _ := cfg.PluginConfig[k].(string); return s }
		v.To, v.GroupBy, v.Window, v.Hop, v.Lateness = str("to"), str("group_by"), str("window"), str("hop"), str("allowed_lateness")
		v.EventTime, v.Filter, v.Late, v.UDAF = str("event_time"), str("filter"), str("late"), str("udaf")
		if aggs, ok := cfg.PluginConfig["aggregates"].([]any); ok {
			for _, a := range aggs {
				v.Aggregates = append(v.Aggregates, fmt.Sprint(a))
			}
		}
	} else if !isNotFound(err) {
		return nil, err
	}
	st, err := c.stats(ctx)
	if err != nil {
		return nil, err
	}
	if s, ok := st.find("sink", info.Key); ok {
		v.Consumed, v.Processed, v.Errors, v.Dead = deref(s.Consumed), deref(s.Processed), s.Errors, s.DeadLettered
	}
	return v, nil
}

func newDeriveListCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the derived topics",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			views, err := listManaged(cmd.Context(), c, "sinks", derivePrefix, isDerive,
				func(name string) (*deriveView, error) { return getDerive(cmd.Context(), c, name) })
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), views)
			}
			if len(views) == 0 {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "no derived topics (create one with: ferry derive create NAME --from STREAM/TOPIC --to STREAM/TOPIC)")
				return err
			}
			rows := make([][]string, 0, len(views))
			for _, v := range views {
				rows = append(rows, []string{v.Name, v.Status, strings.Join(v.From, ","), v.To, strings.Join(v.Aggregates, " ")})
			}
			return table(cmd.OutOrStdout(), "NAME\tSTATUS\tFROM\tTO\tAGGREGATES", rows)
		},
	}
}

func newDeriveGetCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Show a derived topic: its status, last error and configuration",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := checkDeriveName(args[0]); err != nil {
				return err
			}
			v, err := getDerive(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), v)
			}
			return printDerive(cmd.OutOrStdout(), v)
		},
	}
}

func printDerive(w io.Writer, v *deriveView) error {
	rows := [][]string{
		{"name", v.Name}, {"status", v.Status}, {"last error", v.LastError},
		{"from", strings.Join(v.From, ", ")}, {"to", v.To}, {"group by", v.GroupBy},
		{"aggregates", strings.Join(v.Aggregates, ", ")}, {"udaf", v.UDAF}, {"window", v.Window}, {"hop", v.Hop},
		{"lateness", v.Lateness}, {"event time", v.EventTime}, {"filter", v.Filter}, {"late", v.Late},
		{"messages", fmt.Sprintf("%d consumed, %d processed, %d errors, %d dead-lettered", v.Consumed, v.Processed, v.Errors, v.Dead)},
		{"sink key", v.Key}, {"version", fmt.Sprint(v.Version)},
	}
	for _, r := range rows {
		if r[1] == "" {
			continue
		}
		if _, err := fmt.Fprintf(w, "%-12s %s\n", r[0]+":", r[1]); err != nil {
			return err
		}
	}
	return nil
}

func newDeriveDeleteCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Stop a derived topic and delete its configuration (its output topic and checkpoint stay)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			name := args[0]
			if err := checkDeriveName(name); err != nil {
				return err
			}
			key := url.PathEscape(deriveKey(name))
			var cfg sinkConfig
			if err := c.call(cmd.Context(), "GET", "/sinks/"+key+"/configs/active", nil, &cfg); err == nil && cfg.Path != "derive" {
				return fmt.Errorf("sink %s is not a derived topic (its path is %q, not \"derive\")", deriveKey(name), cfg.Path)
			}
			if err := c.call(cmd.Context(), "DELETE", "/sinks/"+key, nil, nil); err != nil {
				if isNotFound(err) {
					return fmt.Errorf("derived topic %s does not exist (ferry derive list shows them)", name)
				}
				return fmt.Errorf("delete derived topic %s: %w", name, err)
			}
			return done(cmd.OutOrStdout(), f.json, "derived topic %s deleted", name)
		},
	}
}

// viewSegment escapes s as one segment of a path: url.PathEscape, and a
// key "." or ".." escaped too (%2E), since a server cleans those segments
// out of a path before routing it.
func viewSegment(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	return url.PathEscape(s)
}

func newDeriveViewCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "view NAME KEY",
		Short: "Look a key up in a derived topic's current state (GET /views/NAME/KEY)",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := checkDeriveName(args[0]); err != nil {
				return err
			}
			var body struct {
				Value json.RawMessage `json:"value"`
			}
			if err := c.call(cmd.Context(), "GET", "/views/"+viewSegment(args[0])+"/"+viewSegment(args[1]), nil, &body); err != nil {
				var e *apiError
				if errors.As(err, &e) && e.Status == http.StatusNotFound && e.Code == "sink_not_found" {
					// No such sink: say so by the name the user gave.
					return fmt.Errorf("derived topic %s does not exist (ferry derive list shows them)", args[0])
				}
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", body.Value)
			return err
		},
	}
}
