package all

// The mysql (mariadb) source and sink.
import _ "github.com/ferryhq/ferry/connectors/mysql"
