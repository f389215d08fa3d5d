package main

import "github.com/ferryhq/ferry/internal/chtest"

func init() { kinds["clickhouse"] = chtest.Server }
