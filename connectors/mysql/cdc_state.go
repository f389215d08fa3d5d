package mysql

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"vitess.io/vitess/go/mysql/replication"
)

// cdcState is the CDC source's saved state (Batch.State), JSON.
//
// Streaming, every transaction in GTID (a MariaDB GTID position, one
// domain-server-seq per domain) is delivered, and so are the first Seq
// row changes of the transaction Txn. During the initial snapshot,
// Snapshot says how far it got and GTID is where streaming will start.
type cdcState struct {
	Mode     string     `json:"mode"`
	GTID     string     `json:"gtid"`
	Txn      string     `json:"txn,omitempty"`
	Seq      uint64     `json:"seq,omitempty"`
	Snapshot *snapState `json:"snapshot,omitempty"`
}

// snapState is how far the initial snapshot got.
type snapState struct {
	// Tables are the captured tables as [database, table], fixed when
	// the snapshot began.
	Tables [][2]string `json:"tables"`
	// Table indexes Tables: the one being read.
	Table int `json:"table"`
	// Key is the last row's primary key values (as text); empty before
	// the table's first row, and always for a table without a primary
	// key (it is read again from its start after a restart).
	Key []string `json:"key,omitempty"`
	// Rows counts the rows sent, for the log.
	Rows uint64 `json:"rows"`
}

// binlogPos is where the stream has been read or acknowledged to.
type binlogPos struct {
	gtid replication.MariadbGTIDSet // complete transactions
	txn  replication.MariadbGTID    // a partly delivered transaction, or zero
	seq  uint64                     // its row changes delivered
}

func (p binlogPos) clone() binlogPos {
	out := p
	out.gtid = make(replication.MariadbGTIDSet, len(p.gtid))
	for d, g := range p.gtid {
		out.gtid[d] = g
	}
	return out
}

// commit records transaction g as complete.
func (p *binlogPos) commit(g replication.MariadbGTID) {
	if p.gtid == nil {
		p.gtid = replication.MariadbGTIDSet{}
	}
	p.gtid[g.Domain] = g
	p.txn, p.seq = replication.MariadbGTID{}, 0
}

func (p binlogPos) state() cdcState {
	st := cdcState{Mode: "cdc", GTID: p.gtid.String()}
	if p.txn != (replication.MariadbGTID{}) {
		st.Txn, st.Seq = p.txn.String(), p.seq
	}
	return st
}

func (p binlogPos) encode() ([]byte, error) {
	b, err := json.Marshal(p.state())
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	return b, nil
}

// parseGTIDSet parses a MariaDB GTID position ("0-1-42,1-2-7"); the set
// it returns prints only numbers, so its String is safe in a statement.
func parseGTIDSet(s string) (replication.MariadbGTIDSet, error) {
	set, err := replication.ParseMariadbGTIDSet(s)
	if err != nil {
		return nil, err
	}
	return set.(replication.MariadbGTIDSet), nil
}

func parseGTID(s string) (replication.MariadbGTID, error) {
	set, err := parseGTIDSet(s)
	if err != nil {
		return replication.MariadbGTID{}, err
	}
	if len(set) != 1 {
		return replication.MariadbGTID{}, fmt.Errorf("%q is not one GTID", s)
	}
	for _, g := range set {
		return g, nil
	}
	panic("unreachable")
}

// decodeCDCState reads a saved state (nil for none).
func decodeCDCState(state []byte) (*cdcState, binlogPos, error) {
	var pos binlogPos
	if len(state) == 0 {
		return nil, pos, nil
	}
	st := &cdcState{}
	if err := json.Unmarshal(state, st); err != nil || st.Mode != "cdc" {
		return nil, pos, fmt.Errorf("saved state is not a CDC state (%d bytes; a polling state?); delete the connector's state to start over", len(state))
	}
	var err error
	if pos.gtid, err = parseGTIDSet(st.GTID); err != nil {
		return nil, pos, fmt.Errorf("saved state: gtid %q: %w", st.GTID, err)
	}
	if st.Txn != "" {
		if pos.txn, err = parseGTID(st.Txn); err != nil {
			return nil, pos, fmt.Errorf("saved state: txn %q: %w", st.Txn, err)
		}
		pos.seq = st.Seq
	} else if st.Seq != 0 {
		return nil, pos, fmt.Errorf("saved state: seq %d without a txn", st.Seq)
	}
	if sn := st.Snapshot; sn != nil {
		if sn.Table < 0 || sn.Table > len(sn.Tables) {
			return nil, pos, fmt.Errorf("saved state: snapshot table %d of %d", sn.Table, len(sn.Tables))
		}
		for _, t := range sn.Tables {
			for _, n := range t {
				if _, err := ident(n); err != nil {
					return nil, pos, fmt.Errorf("saved state: snapshot table name %w", err)
				}
			}
		}
	}
	return st, pos, nil
}

// changeID is a row change's Iggy message id, the u128 (GTID sequence
// << 64 | domain << 32 | change number in the transaction), little-endian
// as Iggy stores ids. A change read again after a restart gets the same
// id, so deduplication by id (the broker's, a sink's) drops the repeat.
func changeID(g replication.MariadbGTID, seq uint64) ([16]byte, error) {
	var id [16]byte
	if seq > math.MaxUint32 {
		return id, fmt.Errorf("transaction %s has more than %d row changes", g, uint64(math.MaxUint32))
	}
	binary.LittleEndian.PutUint64(id[:8], uint64(g.Domain)<<32|seq)
	binary.LittleEndian.PutUint64(id[8:], g.Sequence)
	return id, nil
}
