package all

// The s3 sink (libiggy_connector_s3_sink) and the s3 source.
import _ "github.com/ferryhq/ferry/connectors/s3"
