package all

// The webhook source.
import _ "github.com/ferryhq/ferry/connectors/webhook"
