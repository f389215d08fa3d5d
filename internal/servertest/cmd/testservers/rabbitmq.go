package main

import "github.com/ferryhq/ferry/internal/amqptest"

func init() { kinds["rabbitmq"] = amqptest.Server }
