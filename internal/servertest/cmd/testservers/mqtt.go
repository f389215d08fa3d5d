package main

import "github.com/ferryhq/ferry/internal/mqtttest"

func init() { kinds["mqtt"] = mqtttest.Server }
