package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/webhook"
	"github.com/spf13/cobra"
)

// Webhooks are webhook sources managed through the runtime's API. A
// webhook named NAME is the source with key "webhook-NAME" and path
// "webhook", answering POST <address>/NAME (or --path).
const (
	webhookPrefix        = "webhook-"
	webhookDefaultStream = "webhooks"
)

func webhookKey(name string) string { return webhookPrefix + name }

func isWebhook(key, path string) bool {
	return strings.HasPrefix(key, webhookPrefix) && path == "webhook"
}

func checkWebhookName(name string) error {
	if name == "" || !config.ValidKey(webhookKey(name)) || !config.ValidKey(name) {
		return usageError{fmt.Errorf("webhook name %q: want 1 to %d letters, digits, '-', '_' or '.', starting with a letter or digit", name, 128-len(webhookPrefix))}
	}
	return nil
}

func newWebhookCmd() *cobra.Command {
	f := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Receive webhooks into a topic",
		Long: `A webhook is a webhook source on a running runtime (ferry run), created
through its management API: a listener of its own (--address, so it can face
the internet while the management API stays on loopback) that verifies each
delivery (Standard Webhooks, GitHub, Stripe, HMAC, bearer, basic) and answers
2xx only once the delivery is stored in Iggy. Secrets stay in the runtime's
environment: --secret-env names the variables (several, for rotation), and
the runtime must have them set.`,
	}
	f.register(cmd)
	cmd.AddCommand(newWebhookCreateCmd(f), newWebhookListCmd(f), newWebhookGetCmd(f), newWebhookDeleteCmd(f))
	return cmd
}

type webhookOptions struct {
	topic, stream, path, verify, address, publicURL, format, idHeader string
	secretEnv                                                         []string
}

func newWebhookCreateCmd(f *apiFlags) *cobra.Command {
	o := &webhookOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a webhook source and start it; prints the URL to give the provider",
		Example: `  ferry webhook create github --topic gh-events --verify github --secret-env GH_SECRET
  ferry webhook create stripe --topic payments --verify stripe --secret-env STRIPE_WHSEC --address 0.0.0.0:8088 --public-url https://hooks.example.com`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := o.config(args[0])
			if err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			v, err := createWebhook(cmd.Context(), c, args[0], body)
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), v)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "webhook %s created: deliveries to %s are verified with %s and stored in %s/%s (status %s)\n",
				v.Name, v.Path, v.Verify, v.Stream, v.Topic, v.Status)
			fmt.Fprintf(out, "give the provider this URL: %s\n", v.URL)
			if v.Hint != "" {
				fmt.Fprintln(out, v.Hint)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.topic, "topic", "", "the topic deliveries go to (required)")
	fl.StringVar(&o.stream, "stream", webhookDefaultStream, "the stream of --topic (with the embedded broker, created when missing)")
	fl.StringVar(&o.path, "path", "", "the request path (default /NAME)")
	fl.StringVar(&o.verify, "verify", "", "standard-webhooks, github, stripe, bearer, basic or none (required)")
	fl.StringArrayVar(&o.secretEnv, "secret-env", nil, "an environment variable of the runtime holding a secret (repeatable: any one verifies)")
	fl.StringVar(&o.address, "address", webhook.DefaultAddress, "the listener's host:port (0.0.0.0:PORT to face the network)")
	fl.StringVar(&o.publicURL, "public-url", "", "the URL providers reach the listener at (behind a proxy), for the printed URL")
	fl.StringVar(&o.format, "format", "", "json, form or raw (default json)")
	fl.StringVar(&o.idHeader, "id-header", "", "the header of the provider's delivery id, to deduplicate by (bearer, basic, none)")
	return cmd
}

// webhookBody is upstream's CreateSourceConfig for a webhook.
type webhookBody struct {
	Enabled      bool            `json:"enabled"`
	Name         string          `json:"name"`
	Path         string          `json:"path"`
	Streams      []webhookStream `json:"streams"`
	PluginConfig map[string]any  `json:"plugin_config"`
}

// webhookConfig is a source configuration as the API shows it (upstream's
// SourceConfig), the fields webhooks use.
type webhookConfig struct {
	Key          string          `json:"key"`
	Version      uint64          `json:"version"`
	Path         string          `json:"path"`
	Streams      []webhookStream `json:"streams"`
	PluginConfig map[string]any  `json:"plugin_config"`
}

type webhookStream struct {
	Stream      string `json:"stream"`
	Topic       string `json:"topic"`
	Schema      string `json:"schema,omitempty"`
	BatchLength uint32 `json:"batch_length,omitempty"`
	LingerTime  string `json:"linger_time,omitempty"`
}

// config checks the flags and builds the configuration, checked against
// the webhook source's spec before anything is sent.
func (o *webhookOptions) config(name string) (*webhookBody, error) {
	if err := checkWebhookName(name); err != nil {
		return nil, err
	}
	if strings.TrimSpace(o.topic) == "" || strings.TrimSpace(o.stream) == "" {
		return nil, usageError{errors.New("--topic is required, and --stream must not be empty")}
	}
	if o.verify == "" {
		return nil, usageError{errors.New("--verify is required: standard-webhooks, github, stripe, bearer, basic or none")}
	}
	if o.verify == webhook.VerifyHMAC {
		return nil, usageError{errors.New("--verify hmac needs a header, algorithm and encoding: write the connector file (see ferry connectors describe webhook)")}
	}
	path := o.path
	if path == "" {
		path = "/" + name
	}
	ep := map[string]any{"path": path, "verify": o.verify}
	if len(o.secretEnv) > 0 {
		names := make([]any, len(o.secretEnv))
		for i, n := range o.secretEnv {
			names[i] = n
		}
		ep["secret_env"] = names
	}
	if o.format != "" {
		ep["format"] = o.format
	}
	if o.idHeader != "" {
		ep["id_header"] = o.idHeader
	}
	pc := map[string]any{"address": o.address, "endpoints": []any{ep}}
	if o.publicURL != "" {
		u, err := url.Parse(o.publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageError{fmt.Errorf("--public-url %q: want an http:// or https:// URL", o.publicURL)}
		}
		pc["public_url"] = strings.TrimRight(o.publicURL, "/")
	}
	// The spec's checks here; the secrets are resolved by the runtime, in
	// its environment, when it admits the configuration.
	if err := webhook.Spec.Check(connector.PluginConfig{Values: pc, Source: "webhook " + name}); err != nil {
		return nil, usageError{err}
	}
	if o.verify != webhook.VerifyNone && len(o.secretEnv) == 0 {
		return nil, usageError{fmt.Errorf("--verify %s needs --secret-env NAME (the runtime's variable holding the secret)", o.verify)}
	}
	if o.verify == webhook.VerifyNone && len(o.secretEnv) > 0 {
		return nil, usageError{errors.New("--verify none takes no --secret-env")}
	}
	schema := string(config.SchemaJSON)
	if o.format == webhook.FormatRaw {
		schema = string(config.SchemaRaw)
	}
	return &webhookBody{Enabled: true, Name: name, Path: "webhook", PluginConfig: pc, Streams: []webhookStream{{
		Stream: o.stream, Topic: o.topic, Schema: schema, BatchLength: 500, LingerTime: "2ms"}}}, nil
}

// createWebhook creates and starts a webhook source (createManaged); when
// it does not start (its address is taken, a secret variable is not set
// in the runtime), its configuration is deleted again.
func createWebhook(ctx context.Context, c *apiClient, name string, body *webhookBody) (*webhookView, error) {
	return createManaged(ctx, c, managed{"sources", webhookKey(name), "webhook " + name, "ferry webhook delete " + name}, body,
		func() (*webhookView, error) { return getWebhook(ctx, c, name) },
		func(v *webhookView) (string, string) { return v.Status, v.LastError })
}

// webhookView is a webhook as get and list show it; never a secret.
type webhookView struct {
	Name      string   `json:"name"`
	Key       string   `json:"key"`
	Status    string   `json:"status"`
	LastError string   `json:"last_error,omitempty"`
	Stream    string   `json:"stream"`
	Topic     string   `json:"topic"`
	Address   string   `json:"address"`
	Path      string   `json:"path"`
	Verify    string   `json:"verify"`
	SecretEnv []string `json:"secret_env,omitempty"`
	URL       string   `json:"url"`
	Hint      string   `json:"hint,omitempty"`
	Produced  uint64   `json:"messages_produced"`
	Errors    uint64   `json:"errors"`
}

func webhookViewOf(info sinkInfo, c *webhookConfig) *webhookView {
	v := &webhookView{Name: strings.TrimPrefix(info.Key, webhookPrefix), Key: info.Key, Status: info.Status}
	if info.LastError != nil {
		v.LastError = info.LastError.Message
	}
	if c == nil {
		return v
	}
	if len(c.Streams) > 0 {
		v.Stream, v.Topic = c.Streams[0].Stream, c.Streams[0].Topic
	}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	v.Address = str(c.PluginConfig, "address")
	if v.Address == "" {
		v.Address = webhook.DefaultAddress
	}
	if eps, ok := c.PluginConfig["endpoints"].([]any); ok && len(eps) > 0 {
		if ep, ok := eps[0].(map[string]any); ok {
			v.Path, v.Verify = str(ep, "path"), str(ep, "verify")
			if names, ok := ep["secret_env"].([]any); ok {
				for _, n := range names {
					v.SecretEnv = append(v.SecretEnv, fmt.Sprint(n))
				}
			}
		}
	}
	v.URL, v.Hint = webhookURL(str(c.PluginConfig, "public_url"), v.Address, v.Path)
	return v
}

// webhookURL is what to give the provider: the public URL when set, else
// the listener's address; a hint when that address is not reachable from
// elsewhere.
func webhookURL(public, address, path string) (string, string) {
	if public != "" {
		return public + path, ""
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "http://" + address + path, ""
	}
	switch ip := net.ParseIP(host); {
	case host == "" || (ip != nil && ip.IsUnspecified()):
		return "http://<this host's name or address>:" + port + path,
			"the listener takes any interface; providers need this host's public name, or --public-url behind a proxy"
	case host == "localhost" || (ip != nil && ip.IsLoopback()):
		return "http://" + net.JoinHostPort(host, port) + path,
			"the listener is on loopback: only this machine reaches it (recreate with --address 0.0.0.0:" + port + ", or put a proxy in front and pass --public-url)"
	}
	return "http://" + net.JoinHostPort(host, port) + path, ""
}

func getWebhook(ctx context.Context, c *apiClient, name string) (*webhookView, error) {
	key := url.PathEscape(webhookKey(name))
	var info sinkInfo
	if err := c.call(ctx, "GET", "/sources/"+key, nil, &info); err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("webhook %s does not exist (ferry webhook list shows the webhooks)", name)
		}
		return nil, err
	}
	if !isWebhook(info.Key, info.Path) {
		return nil, fmt.Errorf("source %s is not a webhook (its path is %q, not \"webhook\")", info.Key, info.Path)
	}
	var cfg webhookConfig
	var v *webhookView
	if err := c.call(ctx, "GET", "/sources/"+key+"/configs/active", nil, &cfg); err != nil {
		if !isNotFound(err) {
			return nil, err
		}
		v = webhookViewOf(info, nil)
	} else {
		v = webhookViewOf(info, &cfg)
	}
	st, err := c.stats(ctx)
	if err != nil {
		return nil, err
	}
	if s, ok := st.find("source", info.Key); ok {
		v.Produced, v.Errors = deref(s.Produced), s.Errors
	}
	return v, nil
}

func newWebhookListCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the webhooks",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			list, err := listManaged(cmd.Context(), c, "sources", webhookPrefix, isWebhook,
				func(name string) (*webhookView, error) { return getWebhook(cmd.Context(), c, name) })
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), list)
			}
			if len(list) == 0 {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "no webhooks (create one with: ferry webhook create NAME --topic T --verify SCHEME --secret-env VAR)")
				return err
			}
			rows := make([][]string, 0, len(list))
			for _, v := range list {
				rows = append(rows, []string{v.Name, v.Status, v.Stream + "/" + v.Topic, v.Verify, v.URL})
			}
			return table(cmd.OutOrStdout(), "NAME\tSTATUS\tTOPIC\tVERIFY\tURL", rows)
		},
	}
}

func newWebhookGetCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Show a webhook: its status, URL and configuration (never its secret)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkWebhookName(args[0]); err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			v, err := getWebhook(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), v)
			}
			return printWebhook(cmd.OutOrStdout(), v)
		},
	}
}

func printWebhook(w io.Writer, v *webhookView) error {
	rows := [][]string{
		{"name", v.Name}, {"status", v.Status}, {"last error", v.LastError}, {"url", v.URL}, {"note", v.Hint},
		{"topic", v.Stream + "/" + v.Topic}, {"verify", v.Verify}, {"secret env", strings.Join(v.SecretEnv, ", ")},
		{"listener", v.Address}, {"messages", fmt.Sprintf("%d stored, %d errors", v.Produced, v.Errors)}, {"source key", v.Key},
	}
	for _, r := range rows {
		if r[1] == "" {
			continue
		}
		if _, err := fmt.Fprintf(w, "%-11s %s\n", r[0]+":", r[1]); err != nil {
			return err
		}
	}
	return nil
}

func newWebhookDeleteCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Stop a webhook and delete its configuration (its topic stays)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := checkWebhookName(name); err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			key := url.PathEscape(webhookKey(name))
			var cfg webhookConfig
			if err := c.call(cmd.Context(), "GET", "/sources/"+key+"/configs/active", nil, &cfg); err == nil && cfg.Path != "webhook" {
				return fmt.Errorf("source %s is not a webhook (its path is %q, not \"webhook\")", webhookKey(name), cfg.Path)
			}
			if err := c.call(cmd.Context(), "DELETE", "/sources/"+key, nil, nil); err != nil {
				if isNotFound(err) {
					return fmt.Errorf("webhook %s does not exist (ferry webhook list shows the webhooks)", name)
				}
				return fmt.Errorf("delete webhook %s: %w", name, err)
			}
			return done(cmd.OutOrStdout(), f.json, "webhook %s deleted", name)
		},
	}
}
