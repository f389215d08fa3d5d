package main

import "github.com/ferryhq/ferry/internal/influxtest"

func init() { kinds["influxdb"] = influxtest.Server }
