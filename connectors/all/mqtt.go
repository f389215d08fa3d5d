package all

import _ "github.com/ferryhq/ferry/connectors/mqtt" // mqtt source and sink
