package iceberg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/ferryhq/ferry/connector"
	"github.com/tidwall/gjson"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "iceberg",
		Aliases: []string{"libiggy_connector_iceberg_sink"},
		Summary: "appends JSON messages to Iceberg tables, one snapshot per batch and table, with the Iggy offsets in the snapshot summary (exactly-once rows)",
		Spec:    Spec,
		NewSink: New,
	})
}

// Sink is the iceberg sink.
type Sink struct {
	key     string
	st      *settings
	log     *slog.Logger
	verbose bool

	mu     sync.Mutex
	cat    catalog.Catalog
	exists map[string]bool // dynamic routing: tables known to exist
}

// New builds an iceberg sink from its configuration.
func New(cfg connector.Config) (connector.Sink, error) {
	st, err := parseSettings(cfg)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sink{key: cfg.Key, st: st, log: log, verbose: cfg.Verbose, exists: map[string]bool{}}, nil
}

// Open connects to the catalog and checks that the static tables exist.
func (s *Sink) Open(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.st.timeout)
	defer cancel()
	cat, err := openCatalog(ctx, s.st)
	if err != nil {
		return err
	}
	for _, id := range s.st.tables {
		if _, err := cat.LoadTable(ctx, id); err != nil {
			closeCatalog(cat)
			if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
				return fmt.Errorf("iceberg: tables: %s does not exist in the catalog (Ferry does not create tables): %w", strings.Join(id, "."), err)
			}
			return connector.Unavailable(fmt.Errorf("iceberg: load table %s: %w", strings.Join(id, "."), err))
		}
	}
	s.mu.Lock()
	s.cat = cat
	s.mu.Unlock()
	s.log.Info("iceberg sink open", "catalog", s.st.catalogType, "warehouse", s.st.warehouse, "tables", len(s.st.tables), "dynamic_routing", s.st.dynamic)
	return nil
}

// Close releases the catalog.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cat != nil {
		closeCatalog(s.cat)
		s.cat = nil
	}
	return nil
}

func closeCatalog(cat catalog.Catalog) {
	if c, ok := cat.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// Consume appends the batch to its tables: per table, one snapshot that
// also records the batch's last offset, after dropping the messages a
// snapshot of the table already holds (see the package doc).
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	if len(b.Messages) == 0 {
		return nil
	}
	s.mu.Lock()
	cat := s.cat
	s.mu.Unlock()
	if cat == nil {
		return connector.Unavailable(errors.New("iceberg: the sink is not open"))
	}
	ctx, cancel := context.WithTimeout(ctx, s.st.timeout)
	defer cancel()
	failed := connector.MessageErrors{}
	groups := map[string]*group{}
	var order []string
	add := func(id table.Identifier, i int) {
		name := strings.Join(id, ".")
		g := groups[name]
		if g == nil {
			g = &group{id: id, name: name}
			groups[name] = g
			order = append(order, name)
		}
		g.rows = append(g.rows, i)
	}
	for i := range b.Messages {
		m := &b.Messages[i]
		if !gjson.ValidBytes(m.Payload) || !gjson.ParseBytes(m.Payload).IsObject() {
			failed[i] = connector.Permanent(errors.New("iceberg: the payload is not a JSON object, so it is no row"))
			continue
		}
		if !s.st.dynamic {
			for _, id := range s.st.tables {
				add(id, i)
			}
			continue
		}
		id, err := s.route(ctx, cat, m.Payload)
		if err != nil {
			if connector.IsUnavailable(err) {
				return err
			}
			failed[i] = connector.Permanent(err)
			continue
		}
		add(id, i)
	}
	for _, name := range order {
		g := groups[name]
		if err := s.appendGroup(ctx, cat, b, g, failed); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// route returns the table a message names in dynamic_route_field.
func (s *Sink) route(ctx context.Context, cat catalog.Catalog, payload []byte) (table.Identifier, error) {
	v := gjson.GetBytes(payload, escapePath(s.st.routeField))
	if !v.Exists() || v.Type != gjson.String {
		return nil, fmt.Errorf("iceberg: the message has no string field %q naming its table (dynamic_route_field)", s.st.routeField)
	}
	id, err := parseTableName(v.Str)
	if err != nil {
		return nil, fmt.Errorf("iceberg: dynamic_route_field %q: %w", s.st.routeField, err)
	}
	name := strings.Join(id, ".")
	s.mu.Lock()
	known := s.exists[name]
	s.mu.Unlock()
	if known {
		return id, nil
	}
	ok, err := cat.CheckTableExists(ctx, id)
	if err != nil {
		return nil, connector.Unavailable(fmt.Errorf("iceberg: does table %s exist: %w", name, err))
	}
	if !ok {
		return nil, fmt.Errorf("iceberg: table %s (from %q) does not exist in the catalog", name, s.st.routeField)
	}
	s.mu.Lock()
	s.exists[name] = true
	s.mu.Unlock()
	return id, nil
}

// escapePath makes a field name a gjson path of one key.
func escapePath(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch r {
		case '.', '*', '?', '|', '#', '@', '\\', '!', '=', '<', '>', '%', '"':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
