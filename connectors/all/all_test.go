package all_test

import (
	"testing"

	"github.com/ferryhq/ferry/connector"
	_ "github.com/ferryhq/ferry/connectors/all"
	"github.com/stretchr/testify/require"
)

// Every built-in connector is registered, under its name and upstream's
// library name where there is one.
func TestBuiltinsAreRegistered(t *testing.T) {
	for _, c := range []struct {
		kind connector.Kind
		path string
	}{
		{connector.KindSource, "random"}, {connector.KindSource, "libiggy_connector_random_source"},
		{connector.KindSink, "stdout"}, {connector.KindSink, "libiggy_connector_stdout_sink"},
		{connector.KindSource, "postgres"}, {connector.KindSource, "libiggy_connector_postgres_source"},
		{connector.KindSink, "postgres"}, {connector.KindSink, "libiggy_connector_postgres_sink"},
		{connector.KindSink, "http"}, {connector.KindSink, "libiggy_connector_http_sink"},
		{connector.KindSource, "file"}, {connector.KindSink, "file"},
		{connector.KindSink, "derive"},
		{connector.KindSource, "webhook"}, {connector.KindSource, "http_source"}, {connector.KindSource, "libiggy_connector_http_source"},
		{connector.KindSink, "exec"},
		{connector.KindSink, "clickhouse"}, {connector.KindSink, "libiggy_connector_clickhouse_sink"},
		{connector.KindSink, "rabbitmq"}, {connector.KindSink, "libiggy_connector_rabbitmq_sink"}, {connector.KindSource, "rabbitmq"},
		{connector.KindSink, "s3"}, {connector.KindSink, "libiggy_connector_s3_sink"}, {connector.KindSource, "s3"},
		{connector.KindSink, "influxdb"}, {connector.KindSink, "libiggy_connector_influxdb_sink"},
		{connector.KindSource, "influxdb"}, {connector.KindSource, "libiggy_connector_influxdb_source"},
		{connector.KindSink, "mongodb"}, {connector.KindSink, "libiggy_connector_mongodb_sink"}, {connector.KindSource, "mongodb"},
		{connector.KindSink, "iceberg"}, {connector.KindSink, "libiggy_connector_iceberg_sink"},
		{connector.KindSource, "iggy"},
		{connector.KindSink, "redis"}, {connector.KindSource, "redis"},
		{connector.KindSink, "nats"}, {connector.KindSource, "nats"},
		{connector.KindSink, "mqtt"}, {connector.KindSource, "mqtt"},
		{connector.KindSink, "kafka"}, {connector.KindSource, "kafka"},
		{connector.KindSink, "mysql"}, {connector.KindSource, "mysql"}, {connector.KindSink, "mariadb"}, {connector.KindSource, "mariadb"},
	} {
		_, ok := connector.Default.Lookup(c.kind, c.path)
		require.True(t, ok, "%s %s", c.kind, c.path)
	}
}
