//go:build ferrydeps

// Package internal holds, for one working session, the imports that keep
// the modules the new connectors will use in go.mod; removed before the
// session ends.
package internal

import (
	_ "github.com/apache/arrow-go/v18/arrow"
	_ "github.com/apache/iceberg-go"
	_ "github.com/apache/iceberg-go/catalog"
	_ "github.com/apache/iceberg-go/catalog/hadoop"
	_ "github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud"
	_ "github.com/apache/iceberg-go/table"
	_ "github.com/minio/minio-go/v7"
	_ "go.mongodb.org/mongo-driver/v2/mongo"
)
