package main

import (
	"github.com/ferryhq/ferry/internal/amqptest"
	"github.com/ferryhq/ferry/internal/chtest"
)

func init() {
	kinds["rabbitmq"] = amqptest.Server
	kinds["clickhouse"] = chtest.Server
}
