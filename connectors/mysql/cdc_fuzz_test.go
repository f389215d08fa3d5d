package mysql

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"vitess.io/vitess/go/mysql"
	"vitess.io/vitess/go/mysql/binlog"
	"vitess.io/vitess/go/mysql/replication"
)

// FuzzCDCState: a saved state decodes or is refused with an error, never
// a panic; one that decodes encodes back to the same position.
func FuzzCDCState(f *testing.F) {
	for _, s := range []string{`{"mode":"cdc","gtid":"0-1-42"}`, `{"mode":"cdc","gtid":"0-1-42,1-2-3","txn":"0-1-43","seq":7}`,
		`{"mode":"cdc","gtid":"0-1-5","snapshot":{"tables":[["d","t"]],"table":0,"key":["9"],"rows":3}}`,
		`{"mode":"cdc","gtid":"x"}`, `{"mode":"cdc","gtid":"","seq":3}`, `{"0":{"t":"1","k":"1"}}`, ``, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, pos, err := decodeCDCState(data)
		if err != nil || st == nil {
			return
		}
		enc, err := pos.encode()
		require.NoError(t, err)
		_, again, err := decodeCDCState(enc)
		require.NoError(t, err, "%s", enc)
		require.Equal(t, pos.state(), again.state())
	})
}

// FuzzTableMeta: a TABLE_MAP's optional metadata decodes or is refused.
func FuzzTableMeta(f *testing.F) {
	types := []byte{binlog.TypeLong, binlog.TypeVarchar, binlog.TypeEnum, binlog.TypeSet, binlog.TypeBlob}
	f.Add(types, tlvMeta())
	f.Add(types, []byte{4, 3, 1, 'a'})
	f.Add([]byte{}, []byte{0xfc, 0xff})
	f.Fuzz(func(t *testing.T, types, opt []byte) {
		m, err := parseTableMeta(opt, types)
		if err == nil && m.names != nil {
			require.Len(t, m.names, len(types))
		}
		_, _, _ = optionalMetadata(opt, 6)
	})
}

// tlvMeta is optional metadata for (INT UNSIGNED, VARCHAR, ENUM, SET,
// BLOB): names, signedness, column charsets, enum and set values.
func tlvMeta() []byte {
	field := func(kind byte, val []byte) []byte { return append([]byte{kind, byte(len(val))}, val...) }
	str := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	var names []byte
	for _, n := range []string{"id", "v", "e", "s", "b"} {
		names = append(names, str(n)...)
	}
	out := field(metaSignedness, []byte{0x80})
	out = append(out, field(metaColumnCharset, []byte{45, collBinary})...)
	out = append(out, field(metaColumnName, names)...)
	out = append(out, field(metaEnumStrValue, append([]byte{2}, append(str("x"), str("y")...)...))...)
	out = append(out, field(metaSetStrValue, append([]byte{1}, str("p")...))...)
	return out
}

// withTail appends bytes to an event's body and fixes its length.
func withTail(ev mysql.BinlogEvent, tail []byte) mysql.BinlogEvent {
	b := append(append([]byte(nil), ev.Bytes()...), tail...)
	binary.LittleEndian.PutUint32(b[9:13], uint32(len(b)))
	return mysql.NewMariadbBinlogEvent(b)
}

// FuzzBinlogEvent: after a GTID and a TABLE_MAP, any event is decoded or
// refused with an error, never a panic (vitess's decoders trust the
// lengths inside events; safeEvent turns their panics into errors).
func FuzzBinlogEvent(f *testing.F) {
	format := mysql.NewMariaDBBinlogFormat()
	s := mysql.NewFakeBinlogStream()
	s.ServerID = 1
	tm := &mysql.TableMap{Database: "d", Name: "t", Types: []byte{binlog.TypeLong, binlog.TypeVarchar, binlog.TypeEnum, binlog.TypeSet, binlog.TypeBlob},
		Metadata: []uint16{0, 40, 0xf701, 0xf801, 2}, CanBeNull: mysql.NewServerBitmap(5)}
	tmEv := withTail(mysql.NewTableMapEvent(format, s, 7, tm), tlvMeta())
	gtid := mysql.NewMariaDBGTIDEvent(format, s, replication.MariadbGTID{Domain: 0, Server: 1, Sequence: 9}, true)
	cols := mysql.NewServerBitmap(5)
	for i := range 5 {
		cols.Set(i, true)
	}
	row := []byte{1, 0, 0, 0, 2, 'h', 'i', 1, 1, 3, 0, 0xde, 0xad, 0xbe}
	rows := mysql.Rows{DataColumns: cols, Rows: []mysql.Row{{NullColumns: mysql.NewServerBitmap(5), Data: row}}}
	f.Add(mysql.NewWriteRowsEvent(format, s, 7, rows).Bytes())
	upd := mysql.Rows{IdentifyColumns: cols, DataColumns: cols, Rows: []mysql.Row{{NullIdentifyColumns: mysql.NewServerBitmap(5),
		NullColumns: mysql.NewServerBitmap(5), Identify: row, Data: row}}}
	f.Add(mysql.NewUpdateRowsEvent(format, s, 7, upd).Bytes())
	f.Add(mysql.NewXIDEvent(format, s).Bytes())
	f.Add(mysql.NewQueryEvent(format, s, mysql.Query{Database: "d", SQL: "ALTER TABLE t ADD c INT"}).Bytes())
	f.Add(tmEv.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &cdcSource{log: slog.New(slog.DiscardHandler), set: &cdcSettings{database: "d", tables: map[[2]string]bool{{"d", "t"}: true},
			capture: map[string]bool{"INSERT": true, "UPDATE": true, "DELETE": true}, batchSize: 10}, schema: newSchemaCache(nil)}
		st := &streamer{c: c, items: make(chan item, 1000), tables: map[uint64]*tableEntry{}, format: format}
		ctx := context.Background()
		require.NoError(t, st.safeEvent(ctx, gtid))
		require.NoError(t, st.safeEvent(ctx, tmEv))
		if st.safeEvent(ctx, mysql.NewMariadbBinlogEvent(data)) != nil {
			return
		}
		for len(st.items) > 0 {
			if it := <-st.items; it.msg != nil {
				require.True(t, json.Valid(it.msg.Payload), "%s", it.msg.Payload)
			}
		}
	})
}
