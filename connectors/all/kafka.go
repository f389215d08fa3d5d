package all

// The kafka sink and source.
import _ "github.com/ferryhq/ferry/connectors/kafka"
