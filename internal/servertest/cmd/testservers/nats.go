package main

import "github.com/ferryhq/ferry/internal/natstest"

func init() { kinds["nats"] = natstest.Server }
