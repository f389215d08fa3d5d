package all

// The iceberg sink (upstream's libiggy_connector_iceberg_sink).
import _ "github.com/ferryhq/ferry/connectors/iceberg"
