package mysql

import "github.com/ferryhq/ferry/connector"

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "mysql",
		Aliases: []string{"mariadb"},
		Summary: "writes messages to a MySQL or MariaDB table, idempotently by message id",
		Spec:    SinkSpec,
		NewSink: NewSink,
	})
}
