package all

// The nats sink and source.
import _ "github.com/ferryhq/ferry/connectors/nats"
