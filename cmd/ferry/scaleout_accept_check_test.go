package main

// The checks of TestScaleOutAcceptance (see scaleout_accept_test.go for
// what each one catches): every n in PostgreSQL, every message of the
// topic in PostgreSQL, and the source in one process at a time, from the
// topic's messages and the processes' logs.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
)

// saMsg is one message of the topic.
type saMsg struct {
	part     uint32
	off      uint64
	ts       time.Time // appended by the server
	n        int
	producer string // the process that read it from the file; "" when the headers do not say
}

// saHold is one period of a process holding the source's lease, as its
// log says: from "holding the source's lease" to the source stopped
// after a loss or a failure, or to the process's death.
type saHold struct {
	proc       string
	start, end time.Time // end zero: held when the run ended
	how        string    // how it ended
}

func (h saHold) covers(t time.Time) bool {
	return !t.Before(h.start) && (h.end.IsZero() || !t.After(h.end))
}

func (h saHold) String() string {
	end := "the end of the run"
	if !h.end.IsZero() {
		end = h.end.Format("15:04:05.000000") + " (" + h.how + ")"
	}
	return fmt.Sprintf("%s from %s to %s", h.proc, h.start.Format("15:04:05.000000"), end)
}

// saResult is what the analysis measured.
type saResult struct {
	holderKills, duplicates, dupNumbers, failovers int
	failMin, failMedian, failMax                   time.Duration
	sourceRate                                     float64
}

// saProducer returns the process named by m's producer header.
func saProducer(m iggy.Message) (string, bool) {
	name, found := "", 0
	for _, h := range m.Headers {
		if p, ok := strings.CutPrefix(string(h.Key.Data), saProducerHeader); ok && h.Key.Kind == header.KindString {
			name, found = p, found+1
		}
	}
	return name, found == 1
}

// saReadTopic reads every message of the topic, in append-time order
// (partition and offset break ties).
func saReadTopic(t *testing.T, cl *iggy.Client) []saMsg {
	t.Helper()
	ctx := context.Background()
	d, err := cl.GetTopic(ctx, iggy.NamedID(saStream), iggy.NamedID(saTopic))
	require.NoError(t, err)
	var out []saMsg
	for _, p := range d.Partitions {
		for off := uint64(0); off < p.MessagesCount; {
			r, err := cl.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
				Stream: iggy.NamedID(saStream), Topic: iggy.NamedID(saTopic), Partition: iggy.Partition(p.ID),
				Strategy: iggy.AtOffset(off), Count: 5000})
			require.NoError(t, err)
			require.NotEmpty(t, r.Messages, "partition %d: nothing at offset %d of %d", p.ID, off, p.MessagesCount)
			for _, m := range r.Messages {
				var v struct{ N *int }
				require.NoError(t, json.Unmarshal(m.Payload, &v), "partition %d offset %d: %q", p.ID, m.Offset, m.Payload)
				require.NotNil(t, v.N, "partition %d offset %d: %q", p.ID, m.Offset, m.Payload)
				name, ok := saProducer(m)
				require.True(t, ok, "partition %d offset %d (n %d) does not name exactly one producing process: headers %v",
					p.ID, m.Offset, *v.N, m.Headers)
				out = append(out, saMsg{part: p.ID, off: m.Offset, ts: m.Timestamp, n: *v.N, producer: name})
				off = m.Offset + 1
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.ts.Equal(b.ts) {
			return a.ts.Before(b.ts)
		}
		if a.part != b.part {
			return a.part < b.part
		}
		return a.off < b.off
	})
	return out
}

// saHolds reads the holds of the source's lease from every process's log.
func saHolds(t *testing.T, c *saCluster) ([]saHold, map[string]int) {
	t.Helper()
	var holds []saHold
	fenced := map[string]int{} // per process: log lines about a fenced state save
	for _, r := range c.all {
		f, err := os.Open(r.logPath)
		require.NoError(t, err)
		var open *saHold
		end := func(at time.Time, how string) {
			if open != nil {
				open.end, open.how = at, how
				holds = append(holds, *open)
				open = nil
			}
		}
		lines := bufio.NewScanner(f)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			line := lines.Bytes()
			if strings.Contains(strings.ToLower(string(line)), "fenced") {
				fenced[r.name]++
			}
			var e struct {
				Time time.Time `json:"time"`
				Msg  string    `json:"msg"`
				Key  string    `json:"connector_key"`
				Type string    `json:"connector_type"`
			}
			if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Key != "numbers" || e.Type != "source" {
				continue
			}
			switch e.Msg {
			case "holding the source's lease":
				end(e.Time, "held again without a stop logged") // conservative: the earlier hold lasts until now
				open = &saHold{proc: r.name, start: e.Time}
			case "the source's lease was lost; standing by", "connector failed", "connector panicked":
				end(e.Time, e.Msg)
			}
		}
		require.NoError(t, lines.Err())
		f.Close()
		if !r.dead.IsZero() {
			end(r.dead, "killed")
		}
		if open != nil {
			holds = append(holds, *open)
		}
	}
	sort.Slice(holds, func(i, j int) bool { return holds[i].start.Before(holds[j].start) })
	return holds, fenced
}

// saAnalyse runs the checks and measures duplicates, failovers and the
// source's rate.
func saAnalyse(t *testing.T, c *saCluster, cl *iggy.Client, db *pgx.Conn, total int, kills []saKill) saResult {
	t.Helper()
	ctx := context.Background()
	table := pgx.Identifier{saTable}.Sanitize()
	var res saResult

	// Zero lost: every n in PostgreSQL, and nothing else.
	var missing int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM (SELECT g FROM generate_series(0, $1 - 1) g EXCEPT SELECT n FROM `+table+`) m`,
		total).Scan(&missing))
	msgs := saReadTopic(t, cl)
	inTopic := make([]int, total)
	for _, m := range msgs {
		require.True(t, m.n >= 0 && m.n < total, "n %d in the topic (partition %d offset %d) was never written", m.n, m.part, m.off)
		inTopic[m.n]++
	}
	if missing > 0 {
		rows, err := db.Query(ctx, `SELECT g FROM generate_series(0, $1 - 1) g EXCEPT SELECT n FROM `+table+` ORDER BY 1 LIMIT 20`, total)
		require.NoError(t, err)
		var first []string
		for rows.Next() {
			var g int
			require.NoError(t, rows.Scan(&g))
			where := "not in the topic either: the source lost it"
			if inTopic[g] > 0 {
				where = "in the topic: the sink lost it"
			}
			first = append(first, fmt.Sprintf("%d (%s)", g, where))
		}
		require.NoError(t, rows.Err())
		t.Errorf("%d of %d n are not in PostgreSQL; the first: %s", missing, total, strings.Join(first, ", "))
	}
	var rowCount, stray int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE n IS NULL OR n < 0 OR n >= $1) FROM `+table, total).
		Scan(&rowCount, &stray))
	require.Zero(t, stray, "rows with an n that was never written")
	require.Equal(t, len(msgs), rowCount, "one row for each message of the topic (dedupe_by = offset)")

	// Duplicates: n the source sent more than once.
	byN := map[int][]saMsg{}
	for _, m := range msgs {
		if inTopic[m.n] > 1 {
			byN[m.n] = append(byN[m.n], m)
		}
	}
	res.dupNumbers, res.duplicates = len(byN), len(msgs)-total+missing
	pairs := map[string]int{}
	var dupNs []int
	for n, ms := range byN {
		dupNs = append(dupNs, n)
		var who []string
		for _, m := range ms {
			who = append(who, m.producer)
		}
		pairs[strings.Join(who, "→")]++
	}
	slices.Sort(dupNs)
	if len(dupNs) > 0 {
		t.Logf("duplicates by the processes that sent the copies: %v; n repeated: %s", pairs, saRanges(dupNs))
	}

	// The source in one process at a time.
	holds, fenced := saHolds(t, c)
	for i, h := range holds {
		for _, o := range holds[i+1:] {
			if o.proc != h.proc && (h.end.IsZero() || o.start.Before(h.end)) {
				t.Errorf("check 1: two processes held the source's lease at once: %s and %s", h, o)
			}
		}
	}
	first := map[string]time.Time{}
	for _, h := range holds {
		if _, ok := first[h.proc]; !ok {
			first[h.proc] = h.start
		}
	}
	bad := 0
	for _, m := range msgs {
		start, ok := first[m.producer]
		if !ok || m.ts.Before(start) {
			if bad++; bad <= 10 {
				t.Errorf("check 3: n %d (partition %d offset %d, appended %s) read by %s before it ever held the lease",
					m.n, m.part, m.off, m.ts.Format("15:04:05.000000"), m.producer)
			}
			continue
		}
		for _, h := range holds {
			if h.proc != m.producer && h.covers(m.ts) {
				if bad++; bad <= 10 {
					t.Errorf("check 2: n %d (partition %d offset %d, appended %s) read by %s during the hold of %s",
						m.n, m.part, m.off, m.ts.Format("15:04:05.000000"), m.producer, h)
				}
			}
		}
	}
	runs, holdsOf := map[string]int{}, map[string]int{}
	for i, m := range msgs {
		if i == 0 || msgs[i-1].producer != m.producer {
			runs[m.producer]++
		}
	}
	for _, h := range holds {
		holdsOf[h.proc]++
	}
	for p, n := range runs {
		if n > holdsOf[p] {
			t.Errorf("check 4: the messages of %s come in %d runs in the topic, interleaved with another's, but it held the lease %d times",
				p, n, holdsOf[p])
		}
	}
	t.Logf("%d holds of the source's lease by %d processes; %d runs of messages in the topic; %d log lines about fenced state saves %v",
		len(holds), len(holdsOf), saSum(runs), saSum(fenced), fenced)

	// Failover: from each kill of the process running the source to the
	// first message another process read.
	var fails []time.Duration
	for _, k := range kills {
		if !k.holder {
			continue
		}
		res.holderKills++
		i := sort.Search(len(msgs), func(i int) bool { return msgs[i].ts.After(k.at) })
		for ; i < len(msgs) && msgs[i].producer == k.victim; i++ {
		}
		if i == len(msgs) {
			t.Errorf("no message after the kill of %s at %s from another process", k.victim, k.at.Format("15:04:05.000"))
			continue
		}
		fails = append(fails, msgs[i].ts.Sub(k.at))
		lease := "no hold logged"
		for _, h := range holds {
			if h.start.After(k.at) {
				lease = fmt.Sprintf("%s held the lease %s after the kill", h.proc, h.start.Sub(k.at).Round(time.Millisecond))
				break
			}
		}
		t.Logf("failover after killing %s: first message from %s %s after the kill (%s)",
			k.victim, msgs[i].producer, msgs[i].ts.Sub(k.at).Round(time.Millisecond), lease)
	}
	if len(fails) > 0 {
		slices.Sort(fails)
		res.failovers = len(fails)
		res.failMin, res.failMax = fails[0].Round(time.Millisecond), fails[len(fails)-1].Round(time.Millisecond)
		res.failMedian = fails[len(fails)/2].Round(time.Millisecond)
		if len(fails)%2 == 0 {
			res.failMedian = ((fails[len(fails)/2-1] + fails[len(fails)/2]) / 2).Round(time.Millisecond)
		}
	}

	// The source's rate: messages over the time some process was running
	// it (first to last message, less the failover gaps).
	if len(msgs) > 1 {
		busy := msgs[len(msgs)-1].ts.Sub(msgs[0].ts)
		for _, f := range fails {
			busy -= f
		}
		if busy > 0 {
			res.sourceRate = float64(len(msgs)) / busy.Seconds()
		}
	}
	return res
}

// saRanges renders sorted numbers as ranges: "3-5, 9".
func saRanges(ns []int) string {
	var b strings.Builder
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", ns[i], ns[j])
		} else {
			fmt.Fprintf(&b, "%d", ns[i])
		}
		i = j + 1
	}
	return b.String()
}

func saSum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
