package postgres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/ferryhq/ferry/connectors/postgres/pgjson"
	"github.com/jackc/pglogrepl"
)

func FuzzStateDecode(f *testing.F) {
	f.Add([]byte(`{"mode":"cdc","slot":"s","lsn":"0/16B3748","txn":"0/16B3700","seq":5}`))
	f.Add([]byte(`{"mode":"cdc","slot":"s","lsn":"0/1","snapshot":{"tables":[["public","t"]],"table":1,"key":["7"],"rows":9}}`))
	f.Add([]byte(`{"mode":"cdc","slot":"s","lsn":"0/1","snapshot":{"tables":[],"table":-1}}`))
	f.Add([]byte(`{"mode":"polling","offsets":{"t":{"tracking":"5","key":"x"}},"processed_rows":3}`))
	f.Add([]byte(`{"mode":"polling","offsets":null}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if st, _, err := decodeCDCState(data, "s"); err == nil && len(data) > 0 {
			if sn := st.Snapshot; sn != nil && (sn.Table < 0 || sn.Table > len(sn.Tables)) {
				t.Fatalf("accepted snapshot table %d of %d", sn.Table, len(sn.Tables))
			}
		}
		if st, err := decodePollState(data); err == nil && st.Offsets == nil {
			t.Fatal("nil offsets")
		}
	})
}

// pgoutput messages, for seeds.
func relMsg(id uint32, cols ...string) []byte {
	b := append([]byte{'R'}, be32(id)...)
	b = append(b, "public\x00items\x00"...)
	b = append(b, 'f')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for i, c := range cols {
		b = append(b, byte(i&1))
		b = append(b, c...)
		b = append(b, 0)
		b = append(b, be32(uint32([]int{23, 25, 3802, 1700, 1007}[i%5]))...)
		b = append(b, be32(0xffffffff)...)
	}
	return b
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func tuple(vals ...any) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(vals)))
	for _, v := range vals {
		switch x := v.(type) {
		case nil:
			b = append(b, 'n')
		case byte:
			b = append(b, x) // 'u'
		case string:
			b = append(b, 't')
			b = append(b, be32(uint32(len(x)))...)
			b = append(b, x...)
		}
	}
	return b
}

func beginMsg(final uint64) []byte {
	b := append([]byte{'B'}, binary.BigEndian.AppendUint64(nil, final)...)
	b = binary.BigEndian.AppendUint64(b, 1000)
	return append(b, be32(42)...)
}

func commitMsg(end uint64) []byte {
	b := []byte{'C', 0}
	b = binary.BigEndian.AppendUint64(b, end-8)
	b = binary.BigEndian.AppendUint64(b, end)
	return binary.BigEndian.AppendUint64(b, 1000)
}

// FuzzStreamDecode feeds pgoutput messages, as the server sends them, to
// the replication reader: no panic, and every event is JSON.
func FuzzStreamDecode(f *testing.F) {
	ins := append(append([]byte{'I'}, be32(1)...), 'N')
	upd := append(append([]byte{'U'}, be32(1)...), 'O')
	del := append(append([]byte{'D'}, be32(1)...), 'K')
	f.Add(append(ins, tuple("1", "a\"b", `{"x":1}`, "1.50", "{1,2}")...), []byte{})
	f.Add(append(append(upd, tuple("1", nil, nil, nil, nil)...), append([]byte{'N'}, tuple("1", byte('u'), "[]", "NaN", "{}")...)...), []byte{})
	f.Add(append(del, tuple("1", nil, nil, nil, nil)...), []byte{})
	f.Add(relMsg(2, "a"), append(append([]byte{'I'}, be32(2)...), append([]byte{'N'}, tuple("x", "y", "z")...)...))
	f.Add(append([]byte{'T'}, append(be32(1), append([]byte{0}, be32(1)...)...)...), []byte{'Y'})
	f.Add(append(ins, tuple("1")...), []byte{})
	f.Add([]byte("T0\x00\x00\x01\x00!\x00\x00\x01"), []byte("Y"))        // claims 805 million relations
	f.Add(append(ins, 0, 1, 't', 0xff, 0xff, 0xff, 0xf0, 'x'), []byte{}) // claims a 4 GB value
	f.Fuzz(func(t *testing.T, a, b []byte) {
		set := &sourceSettings{batchSize: 10, capture: map[string]bool{"INSERT": true, "UPDATE": true, "DELETE": true, "TRUNCATE": true}}
		c := &cdc{s: &Source{set: set, types: pgjson.NewTypes()}, set: set}
		st := &streamer{c: c, items: make(chan item, 1<<16), rels: map[uint32]*relation{}}
		ctx := context.Background()
		for _, m := range [][]byte{relMsg(1, "id", "t", "j", "n", "arr"), beginMsg(100), a, b, commitMsg(200)} {
			_ = st.xlog(ctx, pglogrepl.XLogData{WALStart: 50, WALData: m})
		}
		close(st.items)
		for it := range st.items {
			if it.msg != nil && !json.Valid(it.msg.Payload) {
				t.Fatalf("invalid JSON event: %s", it.msg.Payload)
			}
		}
	})
}
