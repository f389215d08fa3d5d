package main

import "github.com/ferryhq/ferry/internal/mongotest"

func init() { kinds["mongodb"] = mongotest.Server }
