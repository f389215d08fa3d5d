// Package all registers every built-in connector; import it for its side
// effect:
//
//	import _ "github.com/ferryhq/ferry/connectors/all"
package all

import (
	_ "github.com/ferryhq/ferry/connectors/clickhouse" // clickhouse sink
	_ "github.com/ferryhq/ferry/connectors/exec"       // exec sink (ferry hook)
	_ "github.com/ferryhq/ferry/connectors/file"       // file source and sink
	_ "github.com/ferryhq/ferry/connectors/http"       // http sink
	_ "github.com/ferryhq/ferry/connectors/postgres"   // postgres source and sink
	_ "github.com/ferryhq/ferry/connectors/rabbitmq"   // rabbitmq source and sink
	_ "github.com/ferryhq/ferry/connectors/random"     // random source
	_ "github.com/ferryhq/ferry/connectors/stdout"     // stdout sink
)
