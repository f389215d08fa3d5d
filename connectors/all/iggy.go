package all

import _ "github.com/ferryhq/ferry/connectors/iggy" // iggy source (replication from another Iggy)
