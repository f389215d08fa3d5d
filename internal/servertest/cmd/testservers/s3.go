package main

import "github.com/ferryhq/ferry/internal/s3test"

func init() { kinds["s3"] = s3test.Server }
