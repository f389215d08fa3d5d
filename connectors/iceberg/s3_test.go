package iceberg

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/pgtest"
	"github.com/ferryhq/ferry/internal/s3test"
	"github.com/stretchr/testify/require"
)

// The warehouse on an S3 server (versitygw) with upstream's store_*
// keys, the catalog on PostgreSQL. It runs on the shared server
// scripts/test.sh starts (FERRY_TEST_S3_URL): this package's TestMain
// stops only PostgreSQL, so it does not start an S3 server of its own.
func TestS3Warehouse(t *testing.T) {
	if os.Getenv(s3test.Server.URLEnv) == "" {
		if os.Getenv(s3test.Server.RequireEnv) == "1" {
			t.Fatalf("%s is not set", s3test.Server.URLEnv)
		}
		t.Skipf("no S3 server: set %s", s3test.Server.URLEnv)
	}
	t.Parallel()
	target := s3test.Shared(t)
	bucket := target.Bucket(t)
	values := map[string]any{"tables": []any{"nyc.users"}, "catalog_type": "sql", "uri": pgtest.DB(t),
		"warehouse": "s3://" + bucket + "/wh", "store_class": "s3", "store_url": target.Endpoint,
		"store_access_key_id": target.AccessKey, "store_secret_access_key": target.Secret, "store_region": s3test.Region}
	st, err := parseSettings(cfg("s3", values))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat, err := openCatalog(ctx, st)
	require.NoError(t, err)
	defer closeCatalog(cat)
	createTable(t, cat, "nyc.users")
	s := openSink(t, cfg("s3", values))
	b := jsonBatch("s", "t", 0, `{"n":0,"text":"a"}`, `{"n":1,"text":"b"}`)
	require.NoError(t, s.Consume(ctx, b))
	require.NoError(t, s.Consume(ctx, b), "a replay")
	require.Equal(t, []row{{0, "a"}, {1, "b"}}, readRows(t, cat, "nyc.users"))
}
