package all

import _ "github.com/ferryhq/ferry/connectors/derive" // derive sink (ferry derive: keyed aggregations into a changelog topic)
