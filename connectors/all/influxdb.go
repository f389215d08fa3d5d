package all

// The influxdb sink (libiggy_connector_influxdb_sink) and the influxdb
// source (libiggy_connector_influxdb_source).
import _ "github.com/ferryhq/ferry/connectors/influxdb"
