package main

import "github.com/ferryhq/ferry/internal/mysqltest"

func init() { kinds["mysql"] = mysqltest.Server }
