package all

// The redis sink and the redis source.
import _ "github.com/ferryhq/ferry/connectors/redis"
