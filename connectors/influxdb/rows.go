package influxdb

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
)

// row is one row of a Flux answer: column → cell text.
type row map[string]string

// parseCSV reads Flux's annotated CSV: each table is annotation lines
// (#datatype, #group, #default), a header, then rows; tables are
// separated by blank lines. A table with an "error" column is Flux
// reporting a failure after it started answering.
func parseCSV(body []byte) ([]row, error) {
	r := csv.NewReader(bytes.NewReader(body))
	r.FieldsPerRecord = -1
	r.ReuseRecord = false
	var header []string
	expectHeader := true
	var rows []row
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("the query's CSV answer: %w", err)
		}
		if len(rec) > 0 && len(rec[0]) > 0 && rec[0][0] == '#' {
			expectHeader = true
			continue
		}
		if expectHeader {
			header, expectHeader = rec, false
			continue
		}
		if len(header) > 1 && header[1] == "error" && len(rec) > 1 {
			return nil, fmt.Errorf("the query failed: %s", rec[1])
		}
		m := make(row, len(header))
		for i, k := range header {
			if k == "" || i >= len(rec) {
				continue
			}
			m[k] = rec[i]
		}
		rows = append(rows, m)
	}
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// scalar is a cell as upstream infers it: "" → null, true/false → a
// boolean, an integer or a finite decimal number → a number, else the
// text.
func scalar(s string) any {
	switch s {
	case "":
		return nil
	case "true":
		return true
	case "false":
		return false
	}
	if jsonNumber.MatchString(s) {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return json.Number(s)
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) {
			return json.Number(s)
		}
	}
	return s
}
