package mysql

import (
	"strings"
	"time"
)

// placeholderNames are custom_query's placeholders, as the postgres
// source names them, and $key (the last row's primary_key_column value,
// NULL before the first row), which breaks ties of $offset.
var placeholderNames = []string{"$now_unix", "$offset", "$limit", "$table", "$now", "$key"}

// identByte reports whether c can continue a name: a placeholder is a
// whole word, so "$offsets" or "a$now" is left as it is.
func identByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// placeholderAt is the placeholder s starts with, or "".
func placeholderAt(s string) string {
	for _, n := range placeholderNames {
		if strings.HasPrefix(s, n) && (len(s) == len(n) || !identByte(s[len(n)])) {
			return n
		}
	}
	return ""
}

// scanQuery splits q into text and placeholders, left to right, in one
// pass (so a table name holding "$offset" is never scanned again). A
// value placeholder in quotes ('$offset' or "$offset", as upstream's
// examples write them) is the placeholder: the quotes go with it. A name
// in backticks is a name: `$offset` is a column.
func scanQuery(q string, text func(string), placeholder func(name string)) {
	start := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c == '`' { // a quoted name: never a placeholder
			if end := strings.IndexByte(q[i+1:], '`'); end >= 0 {
				i += end + 1
			}
			continue
		}
		if c != '$' && c != '\'' && c != '"' {
			continue
		}
		j, end := i, 0
		if c != '$' {
			j = i + 1
		} else if i > 0 && identByte(q[i-1]) {
			continue
		}
		name := ""
		if j < len(q) {
			name = placeholderAt(q[j:])
		}
		if name == "" {
			continue
		}
		end = j + len(name)
		if c != '$' {
			if name == "$table" || end >= len(q) || q[end] != c {
				continue
			}
			end++
		}
		text(q[start:i])
		placeholder(name)
		start, i = end, end-1
	}
	text(q[start:])
}

// placeholders are the placeholders q uses.
func placeholders(q string) map[string]bool {
	out := map[string]bool{}
	scanQuery(q, func(string) {}, func(name string) { out[name] = true })
	return out
}

// customQuery is custom_query for table with its placeholders bound:
// $table becomes the quoted table name, every other placeholder a ? with
// its value in args, so no value ever becomes SQL text. seen says
// whether the table has a position (a row read before).
func (s *sourceSettings) customQueryFor(table string, p position, seen bool, now time.Time) (string, []any) {
	var sb strings.Builder
	var args []any
	scanQuery(s.customQuery, func(t string) { sb.WriteString(t) }, func(name string) {
		switch name {
		case "$table":
			q, _ := tableName(table)
			sb.WriteString(q)
			return
		case "$offset":
			if seen {
				args = append(args, p.Tracking)
			} else if s.initialOffset != nil {
				args = append(args, *s.initialOffset)
			} else {
				args = append(args, nil)
			}
		case "$key":
			if seen {
				args = append(args, p.Key)
			} else {
				args = append(args, nil) // (t = $offset AND k > NULL) is never true
			}
		case "$limit":
			args = append(args, int64(s.batchSize))
		case "$now":
			args = append(args, now.UTC())
		case "$now_unix":
			args = append(args, now.Unix())
		}
		sb.WriteByte('?')
	})
	return sb.String(), args
}
