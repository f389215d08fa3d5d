package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/eventtypes"
	"github.com/ferryhq/ferry/internal/fsx"
)

// `ferry events`: the declared event types of a deployment, read from its
// configuration (config.toml's [events] and the connectors' produces /
// consumes keys; see package eventtypes), without a running runtime.

// eventsSnapshot is where `ferry events check --record` keeps the catalog
// the next check compares with: in the runtime's state directory.
func eventsSnapshot(rt *config.Runtime) string {
	return filepath.Join(rt.State.Path, "events", "catalog.json")
}

func newEventsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List and check the declared event types of a deployment",
		Long: `The event types a deployment declares: [events."NAME"] entries in the
runtime's config.toml (a schema: JSON Schema, Avro or Protobuf), named by
the produces key of sources' [[streams]] and the consumes key of sinks',
and those a connector's spec declares (a plugin's manifest [[events]]
tables; config.toml's entry wins for the same name). The configuration
is read from --config or IGGY_CONNECTORS_CONFIG_PATH.`,
	}
	cmd.AddCommand(newEventsListCmd(), newEventsCheckCmd())
	return cmd
}

// loadCatalog reads the deployment of the runtime config file and builds
// its catalog. Connectors that do not load, and declarations that do not
// build, are returned as problems.
func loadCatalog(cmd *cobra.Command, file string) (*config.Runtime, *eventtypes.Catalog, []string, error) {
	if config.ConfigPath(file, config.OSEnv()) == "" {
		return nil, nil, nil, usageError{errors.New("no configuration: pass --config FILE (the runtime's config.toml) or set IGGY_CONNECTORS_CONFIG_PATH")}
	}
	rt, err := config.Load(file)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := config.NewProvider(rt)
	if err != nil {
		return nil, nil, nil, err
	}
	defer p.Close()
	set, err := p.Load(cmd.Context())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("load the connectors: %w", err)
	}
	var problems []string
	for _, le := range set.Errors {
		problems = append(problems, le.Error())
	}
	// The connectors' specs declare event types too (a plugin's in its
	// manifest's [[events]]).
	cat, err := eventtypes.Build(rt, set.Connectors, eventtypes.WithRegistry(connector.Default))
	var errs config.Errors
	switch {
	case errors.As(err, &errs):
		for _, e := range errs {
			problems = append(problems, e.Error())
		}
	case err != nil:
		problems = append(problems, err.Error())
	}
	return rt, cat, problems, nil
}

func newEventsListCmd() *cobra.Command {
	var file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the event types, their schemas, producers and consumers",
		Example: `  ferry events list --config config.toml
  ferry events list --config config.toml --json > catalog.json   # a snapshot for check --against`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, cat, problems, err := loadCatalog(cmd, file)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(cat); err != nil {
					return fmt.Errorf("encode the catalog: %w", err)
				}
			} else {
				printCatalog(out, cat)
			}
			for _, p := range problems {
				fmt.Fprintln(cmd.ErrOrStderr(), "error:", p)
			}
			if len(problems) > 0 {
				return fmt.Errorf("%d problem(s) in the configuration; the list leaves out what they concern", len(problems))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "config", "", "the runtime's config.toml (default $IGGY_CONNECTORS_CONFIG_PATH)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the catalog as JSON (GET /events' shape, schemas included)")
	return cmd
}

func printCatalog(w io.Writer, cat *eventtypes.Catalog) {
	if len(cat.Types) == 0 {
		fmt.Fprintln(w, `no event types declared (add [events."NAME"] entries to config.toml)`)
		return
	}
	for i, t := range cat.Types {
		if i > 0 {
			fmt.Fprintln(w)
		}
		head := t.Name
		if t.Version != "" {
			head += " " + t.Version
		}
		schema := "no schema"
		if t.SchemaFile != "" {
			schema = t.SchemaFile
		} else if len(t.Schema) > 0 {
			schema = "inline schema"
		}
		fmt.Fprintf(w, "%s (%s, %s)\n", head, t.Format, schema)
		if t.Description != "" {
			fmt.Fprintf(w, "  %s\n", t.Description)
		}
		if t.Origin != "" && !strings.HasPrefix(t.Origin, "config ") {
			// Where a connector's spec declared it (config.toml's go unsaid).
			fmt.Fprintf(w, "  declared in: %s\n", t.Origin)
		}
		for _, s := range t.Shadowed {
			fmt.Fprintf(w, "  also declared in: %s\n", s)
		}
		fmt.Fprintf(w, "  produced by: %s\n", endpointList(t.Producers))
		fmt.Fprintf(w, "  consumed by: %s\n", endpointList(t.Consumers))
	}
}

func endpointList(es []eventtypes.Endpoint) string {
	if len(es) == 0 {
		return "nobody"
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.String()
	}
	return strings.Join(out, ", ")
}

func newEventsCheckCmd() *cobra.Command {
	var file, against string
	var record bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Report consumers of events nobody produces and schema changes that break a consumer",
		Long: `Checks the deployment's declared event types: a sink or hook that consumes
a type nobody produces (or that is produced only on other topics) is an
error; a type nobody consumes is a warning. Then compares the catalog
with an earlier one and reports the changes that break a consumer (a
consumed type removed; a required property removed or made optional, a
type changed, a new required property, an enum value removed,
additionalProperties closed; an Avro field removed or retyped, a new
field without a default, an enum symbol removed).

The earlier catalog is --against FILE (a catalog saved with ` + "`ferry events list --json`" + `
or GET /events, or another deployment's config.toml), else the one the
last ` + "`ferry events check --record`" + ` saved in the state directory
(state.path/events/catalog.json). --record saves the current catalog
there when the check finds no error. The exit code is 1 when there are
errors.`,
		Example: `  ferry events check --config config.toml
  ferry events check --config config.toml --against catalog.json
  ferry events check --config config.toml --record   # after a deployment`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, cat, problems, err := loadCatalog(cmd, file)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, p := range problems {
				fmt.Fprintln(out, "error:", p)
			}
			findings := cat.Check()
			old, from, err := previousCatalog(cmd, rt, against)
			if err != nil {
				return err
			}
			if old != nil {
				findings = append(findings, eventtypes.Compare(old, cat)...)
			}
			for _, f := range findings {
				fmt.Fprintln(out, f.String())
			}
			errs := len(problems)
			for _, f := range findings {
				if f.Severity == eventtypes.SeverityError {
					errs++
				}
			}
			switch {
			case old != nil:
				fmt.Fprintf(out, "%d event type(s); compared with %s\n", len(cat.Types), from)
			default:
				fmt.Fprintf(out, "%d event type(s); no earlier catalog to compare with (%s)\n", len(cat.Types), from)
			}
			if errs > 0 {
				return fmt.Errorf("%d error(s) in the declared event types", errs)
			}
			if record {
				if err := saveSnapshot(rt, cat); err != nil {
					return err
				}
				fmt.Fprintf(out, "recorded the catalog in %s\n", eventsSnapshot(rt))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "config", "", "the runtime's config.toml (default $IGGY_CONNECTORS_CONFIG_PATH)")
	cmd.Flags().StringVar(&against, "against", "", "the earlier catalog: a .json catalog (ferry events list --json, GET /events) or a config.toml")
	cmd.Flags().BoolVar(&record, "record", false, "save the current catalog as the one the next check compares with (only when no error is found)")
	return cmd
}

// previousCatalog is the catalog to compare with and where it came from;
// nil (with a note in from) when there is none.
func previousCatalog(cmd *cobra.Command, rt *config.Runtime, against string) (*eventtypes.Catalog, string, error) {
	if against == "" {
		snap := eventsSnapshot(rt)
		data, err := os.ReadFile(snap)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "none recorded in " + snap + "; --record saves one, --against names one", nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("read the recorded catalog: %w", err)
		}
		old, err := eventtypes.ParseCatalog(data)
		if err != nil {
			return nil, "", fmt.Errorf("the recorded catalog %s: %w", snap, err)
		}
		return old, "the catalog recorded in " + snap, nil
	}
	if strings.EqualFold(filepath.Ext(against), ".toml") {
		_, old, problems, err := loadCatalog(cmd, against)
		if err != nil {
			return nil, "", fmt.Errorf("--against %s: %w", against, err)
		}
		if len(problems) > 0 {
			return nil, "", fmt.Errorf("--against %s: %s", against, strings.Join(problems, "; "))
		}
		return old, against, nil
	}
	data, err := os.ReadFile(against)
	if err != nil {
		return nil, "", fmt.Errorf("--against: %w", err)
	}
	old, err := eventtypes.ParseCatalog(data)
	if err != nil {
		return nil, "", fmt.Errorf("--against %s: %w", against, err)
	}
	return old, against, nil
}

func saveSnapshot(rt *config.Runtime, cat *eventtypes.Catalog) error {
	data, err := json.MarshalIndent(cat, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the catalog: %w", err)
	}
	snap := eventsSnapshot(rt)
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		return fmt.Errorf("record the catalog: %w", err)
	}
	if err := fsx.WriteFile(snap, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("record the catalog: %w", err)
	}
	return nil
}
