package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/postgres/pgjson"
	"github.com/jackc/pgx/v5/pgxpool"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "postgres",
		Aliases:   []string{"libiggy_connector_postgres_source"},
		Summary:   "PostgreSQL rows by polling a table or query, or changes by logical replication (pgoutput)",
		Spec:      SourceSpec,
		NewSource: NewSource,
	})
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "postgres",
		Aliases: []string{"libiggy_connector_postgres_sink"},
		Summary: "writes messages to a PostgreSQL table, idempotently by message id",
		Spec:    SinkSpec,
		NewSink: NewSink,
	})
}

// sourceMode is one way of reading: polling or CDC.
type sourceMode interface {
	open(ctx context.Context, state []byte) error
	poll(ctx context.Context) (*connector.Batch, error)
	ack(ctx context.Context, b *connector.Batch) error
	nack(b *connector.Batch)
	close(ctx context.Context) error
}

// Source is the postgres source.
type Source struct {
	conn    Connection
	set     *sourceSettings
	poolCfg *pgxpool.Config
	log     *slog.Logger
	plugin  connector.PluginConfig

	pool  *pgxpool.Pool
	types *pgjson.Types
	mode  sourceMode

	closeOnce sync.Once
	closeErr  error
}

// NewSource builds a postgres source; configuration errors name the key.
func NewSource(cfg connector.Config) (connector.Source, error) {
	parsed, err := SourceSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	set, conn := sourceSettingsFrom(parsed), connectionFrom(parsed)
	poolCfg, err := conn.poolConfig(parsed)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	set.verbose = set.verbose || cfg.Verbose
	s := &Source{conn: conn, set: set, poolCfg: poolCfg, log: log, plugin: cfg.Plugin}
	if set.deleteAfterRead && set.processedColumn != "" {
		log.Warn("delete_after_read and processed_column are both set; rows are deleted (as upstream)")
	}
	if set.cdc && set.payloadColumn != "" {
		log.Warn("payload_column applies to polling mode; CDC sends change events")
	}
	return s, nil
}

// Open connects, loads the database's array and domain types, and opens
// the mode with the saved state. A failed Open releases what it opened
// (the runtime calls Close only after a successful Open).
func (s *Source) Open(ctx context.Context, state []byte) (err error) {
	defer func() {
		if err != nil {
			s.release(ctx)
		}
	}()
	pool, err := s.conn.connect(ctx, s.poolCfg)
	if err != nil {
		return fmt.Errorf("postgres source: %w", err)
	}
	s.pool = pool
	s.types, err = loadTypes(ctx, pool)
	if err != nil {
		return fmt.Errorf("postgres source: %w", err)
	}
	if s.set.cdc {
		s.mode = newCDC(s)
	} else {
		s.mode = newPoller(s)
	}
	s.log.Info("postgres source connected", "server", describe(&s.poolCfg.ConnConfig.Config), "mode", map[bool]string{true: "cdc", false: "polling"}[s.set.cdc])
	if err := s.mode.open(ctx, state); err != nil {
		return fmt.Errorf("postgres source: %w", s.conn.scrubErr(err))
	}
	return nil
}

// Poll returns the next batch: rows (polling) or change events (CDC).
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	if s.mode == nil {
		return nil, fmt.Errorf("postgres source: Poll before Open")
	}
	b, err := s.mode.poll(ctx)
	if err != nil && ctx.Err() == nil {
		err = fmt.Errorf("postgres source: %w", s.conn.scrubErr(err))
	}
	return b, err
}

// Ack runs what waits for the batch to be durable in Iggy: deleting or
// marking the rows read (polling), advancing the replication slot (CDC).
func (s *Source) Ack(ctx context.Context, b *connector.Batch) error {
	if s.mode == nil {
		return nil
	}
	if err := s.mode.ack(ctx, b); err != nil {
		return fmt.Errorf("postgres source: %w", s.conn.scrubErr(err))
	}
	return nil
}

// Nack keeps the batch's pending work for its redelivery.
func (s *Source) Nack(_ context.Context, b *connector.Batch, _ error) {
	if s.mode != nil {
		s.mode.nack(b)
	}
}

// Close stops the mode and closes the connections; it is idempotent.
func (s *Source) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.release(ctx) })
	return s.closeErr
}

func (s *Source) release(ctx context.Context) error {
	var err error
	if s.mode != nil {
		err = s.mode.close(ctx)
		s.mode = nil
	}
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
	return err
}

func (s *Source) retry(ctx context.Context, fn func() error) error {
	return retryTransient(ctx, s.set.maxRetries, s.set.retryDelay, fn)
}

// loadTypes teaches the JSON mapping the database's array and domain
// types (enums' arrays, domains over numbers, extension types).
func loadTypes(ctx context.Context, pool *pgxpool.Pool) (*pgjson.Types, error) {
	t := pgjson.NewTypes()
	rows, err := pool.Query(ctx, `SELECT oid, typelem, typdelim::text FROM pg_type WHERE typcategory = 'A' AND typelem <> 0`)
	if err != nil {
		return nil, fmt.Errorf("load array types: %w", err)
	}
	for rows.Next() {
		var oid, elem uint32
		var delim string
		if err := rows.Scan(&oid, &elem, &delim); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load array types: %w", err)
		}
		if len(delim) == 1 {
			t.AddArray(oid, elem, delim[0])
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load array types: %w", err)
	}
	rows, err = pool.Query(ctx, `SELECT oid, typbasetype FROM pg_type WHERE typtype = 'd'`)
	if err != nil {
		return nil, fmt.Errorf("load domain types: %w", err)
	}
	for rows.Next() {
		var oid, base uint32
		if err := rows.Scan(&oid, &base); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load domain types: %w", err)
		}
		t.AddDomain(oid, base)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load domain types: %w", err)
	}
	return t, nil
}

var (
	_ connector.Source = (*Source)(nil)
	_ connector.Acker  = (*Source)(nil)
)
