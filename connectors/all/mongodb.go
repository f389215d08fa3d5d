package all

import _ "github.com/ferryhq/ferry/connectors/mongodb" // mongodb source and sink
