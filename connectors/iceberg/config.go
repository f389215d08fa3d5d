package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/ferryhq/ferry/connector"

	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// warehouses
	_ "github.com/jackc/pgx/v5/stdlib"             // the "pgx" database/sql driver of the sql catalog
)

// Catalog types: upstream's rest and glue, and Ferry's sql and hadoop.
const (
	catalogREST   = "rest"
	catalogGlue   = "glue"
	catalogSQL    = "sql"
	catalogHadoop = "hadoop"
)

// Store classes: upstream's names; Ferry writes s3 and fs.
var storeClasses = []string{"s3", "fs", "gcs", "azdls", "oss"}

// namePart is one level of a namespace or a table name. Names end up in
// object keys and paths (<warehouse>/<ns>.db/<table>/...), so a name
// holds no separator, dot, NUL or space and cannot be "." or "..".
var namePart = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$`)

// parseTableName splits "ns.table" (or "a.b.table") into an identifier,
// refusing names that are not plain.
func parseTableName(s string) (table.Identifier, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return nil, fmt.Errorf("%q: expected <namespace>.<table>", s)
	}
	for _, p := range parts {
		if !namePart.MatchString(p) {
			return nil, fmt.Errorf("%q: %q is not a plain name (letters, digits, _ and -, at most 128, not starting with -)", s, p)
		}
	}
	return parts, nil
}

// Spec is the sink's plugin_config: upstream's keys, then Ferry's.
var Spec = connector.NewSpec(
	connector.NewStringListField("tables").Require().WithExample([]string{"nyc.users"}).
		WithDoc(`the tables every message is appended to, "<namespace>.<table>"; they must exist (empty entries are ignored, as in upstream's dynamic routing example)`),
	connector.NewEnumField("catalog_type", catalogREST, catalogGlue, catalogSQL, catalogHadoop).Require().WithExample(catalogREST).
		WithCheck(func(v any) error {
			if v == catalogGlue {
				return errors.New("glue is not built in Ferry (iceberg-go's Glue catalog needs the AWS Glue SDK, which this build does not link); use rest or Ferry's sql")
			}
			return nil
		}).
		WithDoc(`rest: a REST catalog at uri; Ferry's sql: a SQL catalog in the PostgreSQL database uri names (postgres://...); Ferry's hadoop: a catalog kept in the warehouse directory itself (local filesystem only)`),
	connector.NewStringField("warehouse").Require().WithExample("warehouse").
		WithDoc("rest: the warehouse name passed to the catalog; sql and hadoop: where tables live (s3://bucket/path, file:///path, or a bucket name for store_class s3 / a directory for fs)"),
	connector.NewStringField("uri").AsSecret().WithDefault("").WithExample("http://localhost:8181").
		WithDoc("rest: the catalog's URL; sql: the PostgreSQL DSN; required for both, and redacted as a secret since a DSN may hold a password. Upstream requires it"),
	connector.NewBoolField("dynamic_routing").WithDefault(false).
		WithDoc("route each message to the table its dynamic_route_field names instead of to tables. Upstream requires it"),
	connector.NewStringField("dynamic_route_field").WithDefault("").
		WithDoc(`the top-level JSON field holding "<namespace>.<table>". Upstream requires it`),
	connector.NewStringField("store_url").WithDefault("").WithExample("http://localhost:9000").
		WithDoc("the S3 endpoint (s3.endpoint); empty: AWS's. Upstream requires it"),
	connector.NewStringField("store_access_key_id").WithDefault("").WithDoc("S3 access key id. Upstream requires it"),
	connector.NewStringField("store_secret_access_key").AsSecret().WithDefault("").WithDoc("S3 secret key (a secret). Upstream requires it"),
	connector.NewStringField("store_region").WithDefault("").WithExample("us-east-1").WithDoc("S3 region. Upstream requires it"),
	connector.NewEnumField("store_class", storeClasses...).Require().WithExample("s3").WithCheck(func(v any) error {
		if v != "s3" && v != "fs" {
			return fmt.Errorf("%s is not built in Ferry (nor in upstream, which writes s3 only); use s3 or fs", v)
		}
		return nil
	}).WithDoc("s3: an S3-compatible store; Ferry's fs: the local filesystem"),
	connector.NewBoolField("store_path_style").WithDefault(true).
		WithDoc("Ferry: path-style S3 requests (http://host/bucket/key), as S3-compatible servers want; false: virtual-hosted style"),
	connector.NewStringField("credential").AsSecret().WithDefault("").
		WithDoc("Ferry: rest only, the OAuth2 client credential (\"id:secret\") for the catalog (a secret)"),
	connector.NewStringField("token").AsSecret().WithDefault("").
		WithDoc("Ferry: rest only, a bearer token for the catalog (a secret)"),
	connector.NewStringField("catalog_name").WithDefault("ferry").
		WithDoc("Ferry: sql, the catalog_name rows of the iceberg_tables table belong to"),
	connector.NewIntField("commit_retries").Between(0, 1000).WithDefault(20).
		WithDoc("Ferry: times a commit that lost a race with another writer is redone on the reloaded table before the batch fails"),
	connector.NewDurationField("timeout").WithDefault(time.Minute).
		WithDoc("Ferry: bound on one batch's catalog calls, writes and commits"),
).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	typ := s.String("catalog_type")
	if (typ == catalogREST || typ == catalogSQL) && s.String("uri") == "" {
		fail("uri", "catalog_type %q needs uri", typ)
	}
	if typ == catalogSQL && s.String("uri") != "" {
		if u, err := url.Parse(s.String("uri")); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			fail("uri", "the sql catalog takes a postgres:// DSN (PostgreSQL is the SQL database Ferry links a driver for)")
		}
	}
	if typ == catalogHadoop && s.String("store_class") != "fs" {
		fail("store_class", "the hadoop catalog is not atomic on object stores; use it with fs, or use sql")
	}
	if s.Bool("dynamic_routing") {
		if s.String("dynamic_route_field") == "" {
			fail("dynamic_route_field", "dynamic_routing needs the field naming each message's table")
		}
	}
	n := 0
	for i, t := range s.Strings("tables") {
		if t == "" {
			continue
		}
		n++
		if _, err := parseTableName(t); err != nil {
			fail(fmt.Sprintf("tables[%d]", i), "%v", err)
		}
	}
	if n == 0 && !s.Bool("dynamic_routing") {
		fail("tables", "name at least one table, or turn dynamic_routing on")
	}
})

// settings is the parsed configuration.
type settings struct {
	catalogType, warehouse, uri, catalogName string
	tables                                   []table.Identifier
	dynamic                                  bool
	routeField                               string
	props                                    iceberg.Properties // FileIO properties
	credential, token                        string
	retries                                  int
	timeout                                  time.Duration
}

func parseSettings(cfg connector.Config) (*settings, error) {
	set, err := Spec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	st := &settings{
		catalogType: set.String("catalog_type"), uri: set.String("uri"), catalogName: set.String("catalog_name"),
		dynamic: set.Bool("dynamic_routing"), routeField: set.String("dynamic_route_field"),
		credential: set.String("credential"), token: set.String("token"),
		retries: set.Int("commit_retries"), timeout: set.Duration("timeout"), props: iceberg.Properties{},
	}
	for _, t := range set.Strings("tables") {
		if t != "" {
			id, _ := parseTableName(t) // checked by the lint
			st.tables = append(st.tables, id)
		}
	}
	class := set.String("store_class")
	if class == "s3" {
		put := func(k, v string) {
			if v != "" {
				st.props[k] = v
			}
		}
		put(iceio.S3EndpointURL, set.String("store_url"))
		put(iceio.S3Region, set.String("store_region"))
		put(iceio.S3AccessKeyID, set.String("store_access_key_id"))
		put(iceio.S3SecretAccessKey, set.String("store_secret_access_key"))
		st.props[iceio.S3ForceVirtualAddressing] = fmt.Sprint(!set.Bool("store_path_style"))
	}
	st.warehouse = set.String("warehouse")
	if st.catalogType != catalogREST && !strings.Contains(st.warehouse, "://") {
		if class == "s3" {
			st.warehouse = "s3://" + st.warehouse
		} else {
			abs, err := filepath.Abs(st.warehouse)
			if err != nil {
				return nil, set.Errorf("warehouse", "%v", err)
			}
			st.warehouse = "file://" + abs
		}
	}
	if u, err := url.Parse(st.warehouse); st.catalogType != catalogREST && (err != nil || u.Scheme == "file") {
		if err != nil {
			return nil, set.Errorf("warehouse", "%v", err)
		}
		if err := cfg.Paths.Check(u.Path); err != nil {
			return nil, set.Errorf("warehouse", "%v", err)
		}
	}
	return st, nil
}

// openCatalog connects to the configured catalog. ctx bounds the
// connection checks.
func openCatalog(ctx context.Context, st *settings) (catalog.Catalog, error) {
	switch st.catalogType {
	case catalogSQL:
		db, err := sql.Open("pgx", st.uri)
		if err != nil {
			return nil, fmt.Errorf("sql catalog: %w", err)
		}
		db.SetMaxOpenConns(4)
		db.SetConnMaxIdleTime(time.Minute)
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return nil, connector.Unavailable(fmt.Errorf("sql catalog: PostgreSQL at %s: %w", safeDSN(st.uri), err))
		}
		props := iceberg.Properties{"warehouse": st.warehouse}
		for k, v := range st.props {
			props[k] = v
		}
		cat, err := sqlcat.NewCatalog(st.catalogName, db, sqlcat.Postgres, props)
		if err != nil {
			db.Close()
			return nil, connector.Unavailable(fmt.Errorf("sql catalog: %w", err))
		}
		return &ownedDB{Catalog: cat, db: db}, nil
	case catalogHadoop:
		cat, err := hadoop.NewCatalog("ferry", st.warehouse, st.props)
		if err != nil {
			return nil, fmt.Errorf("hadoop catalog: %w", err)
		}
		return cat, nil
	default:
		opts := []rest.Option{rest.WithWarehouseLocation(st.warehouse), rest.WithAdditionalProps(st.props)}
		if st.credential != "" {
			opts = append(opts, rest.WithCredential(st.credential))
		}
		if st.token != "" {
			opts = append(opts, rest.WithOAuthToken(st.token))
		}
		cat, err := rest.NewCatalog(ctx, "rest", st.uri, opts...)
		if err != nil {
			return nil, connector.Unavailable(fmt.Errorf("rest catalog at %s: %w", st.uri, err))
		}
		return cat, nil
	}
}

// ownedDB is a SQL catalog whose database handle the sink opened.
type ownedDB struct {
	*sqlcat.Catalog
	db *sql.DB
}

func (o *ownedDB) Close() error { _ = o.Catalog.Close(); return o.db.Close() }

// safeDSN is a DSN without its password, for messages.
func safeDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "****")
		u.RawQuery = q.Encode()
	}
	return u.String()
}
