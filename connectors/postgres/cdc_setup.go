package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// setup checks wal_level, creates the publication if it is missing (and
// adds configured tables it lacks), and sets REPLICA IDENTITY FULL when
// asked.
func (c *cdc) setup(ctx context.Context) error {
	pool := c.s.pool
	var level string
	if err := pool.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return fmt.Errorf("check wal_level: %w", err)
	}
	if level != "logical" {
		return fmt.Errorf("CDC needs wal_level = logical (the server has %q): set it in postgresql.conf and restart PostgreSQL", level)
	}
	pub := c.set.publication
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", pub).Scan(&exists); err != nil {
		return fmt.Errorf("look up publication %q: %w", pub, err)
	}
	quotedPub := pgx.Identifier{pub}.Sanitize()
	if !exists {
		sql := "CREATE PUBLICATION " + quotedPub + " FOR ALL TABLES"
		if len(c.set.tables) > 0 {
			names := make([]string, len(c.set.tables))
			for i, t := range c.set.tables {
				names[i] = tableIdent(t).Sanitize()
			}
			sql = "CREATE PUBLICATION " + quotedPub + " FOR TABLE " + strings.Join(names, ", ")
		}
		if _, err := pool.Exec(ctx, sql); err != nil && !isDuplicate(err) {
			return fmt.Errorf("create publication %q: %w", pub, err)
		}
		c.s.log.Info("created publication", "publication", pub, "tables", c.set.tables)
	} else {
		for _, t := range c.set.tables {
			var published bool
			err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication_tables pt
				WHERE pt.pubname = $1 AND format('%I.%I', pt.schemaname, pt.tablename)::regclass = $2::regclass)`,
				pub, tableIdent(t).Sanitize()).Scan(&published)
			if err != nil {
				return fmt.Errorf("check that publication %q has table %q: %w", pub, t, err)
			}
			if !published {
				if _, err := pool.Exec(ctx, "ALTER PUBLICATION "+quotedPub+" ADD TABLE "+tableIdent(t).Sanitize()); err != nil {
					return fmt.Errorf("add table %q to publication %q: %w", t, pub, err)
				}
				c.s.log.Info("added table to publication", "publication", pub, "table", t)
			}
		}
	}
	if c.set.replicaFull {
		tables, err := c.publishedTables(ctx)
		if err != nil {
			return err
		}
		for _, t := range tables {
			var ident string
			if err := pool.QueryRow(ctx, "SELECT relreplident::text FROM pg_class WHERE oid = $1::regclass", t.Sanitize()).Scan(&ident); err != nil {
				return fmt.Errorf("replica identity of %s: %w", t.Sanitize(), err)
			}
			if ident != "f" {
				if _, err := pool.Exec(ctx, "ALTER TABLE "+t.Sanitize()+" REPLICA IDENTITY FULL"); err != nil {
					return fmt.Errorf("set REPLICA IDENTITY FULL on %s: %w", t.Sanitize(), err)
				}
			}
		}
	}
	return nil
}

// publishedTables lists the publication's tables in a stable order.
func (c *cdc) publishedTables(ctx context.Context) ([]pgx.Identifier, error) {
	rows, err := c.s.pool.Query(ctx, "SELECT schemaname::text, tablename::text FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1, 2", c.set.publication)
	if err != nil {
		return nil, fmt.Errorf("list tables of publication %q: %w", c.set.publication, err)
	}
	defer rows.Close()
	var out []pgx.Identifier
	for rows.Next() {
		var schema, table string
		if err := rows.Scan(&schema, &table); err != nil {
			return nil, fmt.Errorf("list tables of publication %q: %w", c.set.publication, err)
		}
		out = append(out, pgx.Identifier{schema, table})
	}
	return out, rows.Err()
}

func isDuplicate(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42710"
}

type slotInfo struct {
	confirmed pglogrepl.LSN
}

// slotInfo returns the slot, or nil when it does not exist; a slot of
// another plugin or database is an error.
func (c *cdc) slotInfo(ctx context.Context) (*slotInfo, error) {
	var plugin, db, confirmed *string
	var current string
	err := c.s.pool.QueryRow(ctx, `SELECT s.plugin::text, s.database::text, s.confirmed_flush_lsn::text, current_database()::text
		FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1`, c.set.slot).Scan(&plugin, &db, &confirmed, &current)
	if err != nil {
		return nil, fmt.Errorf("look up replication slot %q: %w", c.set.slot, err)
	}
	switch {
	case plugin == nil:
		return nil, nil
	case *plugin != "pgoutput":
		return nil, fmt.Errorf("replication slot %q uses plugin %q, not pgoutput (perhaps an upstream test_decoding slot): drop it with SELECT pg_drop_replication_slot('%s') or set replication_slot to another name", c.set.slot, *plugin, c.set.slot)
	case db == nil || *db != current:
		return nil, fmt.Errorf("replication slot %q belongs to another database; set replication_slot to another name", c.set.slot)
	case confirmed == nil:
		return nil, fmt.Errorf("replication slot %q has no confirmed position", c.set.slot)
	}
	lsn, err := pglogrepl.ParseLSN(*confirmed)
	if err != nil {
		return nil, fmt.Errorf("replication slot %q: confirmed_flush_lsn %q: %w", c.set.slot, *confirmed, err)
	}
	return &slotInfo{confirmed: lsn}, nil
}

// replicationConn opens a logical replication connection.
func (c *cdc) replicationConn(ctx context.Context) (*pgconn.PgConn, error) {
	cfg := c.s.poolCfg.ConnConfig.Config.Copy()
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open replication connection to %s: %w", describe(cfg), err)
	}
	return conn, nil
}

var snapshotName = regexp.MustCompile(`^[0-9A-Fa-f-]+$`)

// createSlot creates the slot; with a snapshot configured it exports the
// slot's snapshot and reads the published tables in it, so the snapshot
// and the stream (which starts at the slot's consistent point) meet with
// neither a gap nor an overlap.
func (c *cdc) createSlot(ctx context.Context) error {
	conn, err := c.replicationConn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	action := "NOEXPORT_SNAPSHOT"
	if c.set.snapshot {
		action = "EXPORT_SNAPSHOT"
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, c.set.slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: action})
	if err != nil {
		return fmt.Errorf("create replication slot %q: %w", c.set.slot, err)
	}
	point, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return fmt.Errorf("create replication slot %q: consistent point %q: %w", c.set.slot, res.ConsistentPoint, err)
	}
	c.s.log.Info("created replication slot", "slot", c.set.slot, "consistent_point", point)
	c.start = position{lsn: point}
	if !c.set.snapshot {
		return nil
	}
	if !snapshotName.MatchString(res.SnapshotName) {
		return fmt.Errorf("create replication slot %q: unexpected snapshot name %q", c.set.slot, res.SnapshotName)
	}
	// The exported snapshot lives until conn runs another command or
	// closes: import it first.
	c.snap, err = newSnapshotter(ctx, c, res.SnapshotName, point, nil)
	return err
}
