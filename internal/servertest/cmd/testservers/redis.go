package main

import "github.com/ferryhq/ferry/internal/redistest"

func init() { kinds["redis"] = redistest.Server }
