//go:build ferrydeps

// Package internal holds, for one working session, the imports that keep
// the modules the new connectors will use in go.mod; removed before the
// session ends.
package internal

import _ "github.com/go-sql-driver/mysql"
