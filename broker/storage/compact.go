package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

// The key convention of compaction (iggy.KeyHeader and iggy.DeletedHeader;
// compact_test checks they agree).
const (
	keyHeader     = "key"
	deletedHeader = "deleted"
)

// CompactOptions say what Compact removes.
type CompactOptions struct {
	// TombstoneRetention is how long a deletion marker that is the latest
	// message of its key is kept after it was appended (its record's
	// base_timestamp); a later compaction removes it. 0 removes it at the
	// first compaction of its segment.
	TombstoneRetention time.Duration
	// Now is the time retention counts from; zero means time.Now().
	Now time.Time
}

// CompactStats describe one Compact call.
type CompactStats struct {
	// Segments are the segments rewritten, oldest first.
	Segments []CompactedSegment
	// Keys is the number of distinct keys the partition held.
	Keys int
	// Skipped says nothing was appended and no deletion marker came due
	// since the last compaction, so nothing was read.
	Skipped bool
}

// CompactedSegment describes one rewritten segment.
type CompactedSegment struct {
	BaseOffset, NextOffset        uint64
	BytesBefore, BytesAfter       uint64 // record bytes
	MessagesBefore, MessagesAfter uint64
	TombstonesRemoved             uint64
}

// latest is the newest message of one key.
type latest struct {
	offset  uint64
	ts      uint64 // its record's base_timestamp, µs
	deleted bool
}

// compactState belongs to compactMu.
type compactState struct {
	doneNext uint64 // NextOffset when the last pass finished; 0: none
	purges   uint64 // l.purges then
	// tombOldest is the append time (µs) of the oldest deletion marker
	// kept; 0: none. It expires at tombOldest plus the retention of the
	// pass that asks, so a retention made shorter applies at once.
	tombOldest uint64
}

// Compact implements Log. It serializes with other Compact calls only:
// the segments are read under the read lock record by record, the new
// segment is written and synced without any lock, and only the switch
// (rename over the old files, directory fsync, swap in the segment list)
// holds the append lock. A segment that DropOldest or Purge removed in the
// meantime is left alone.
func (l *partitionLog) Compact(ctx context.Context, o CompactOptions) (CompactStats, error) {
	l.compactMu.Lock()
	defer l.compactMu.Unlock()
	var st CompactStats
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	nowUS := uint64(max(now.UnixMicro(), 0))
	retention := uint64(max(o.TombstoneRetention.Microseconds(), 0))
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return st, ErrClosed
	}
	segs := slices.Clone(l.segs)
	counts := make([]int, len(segs))
	for i, s := range segs {
		counts[i] = len(s.entries)
	}
	next, purges := l.next.Load(), l.purges
	l.mu.RUnlock()
	cs := &l.compact
	if next == cs.doneNext && purges == cs.purges && (cs.tombOldest == 0 || cs.tombOldest+retention > nowUS) {
		st.Skipped = true
		return st, nil
	}
	keys := map[string]latest{}
	var frames []frameInfo
	var buf []byte
	for i, s := range segs {
		for ei := range counts[i] {
			var err error
			if buf, frames, err = l.readFrames(s, ei, buf, frames[:0]); err != nil {
				return st, l.abandoned(s, err)
			}
			for _, f := range frames {
				if f.keyed {
					keys[string(f.key)] = latest{offset: f.offset, ts: f.ts, deleted: f.deleted}
				}
			}
			if err := ctx.Err(); err != nil {
				return st, fmt.Errorf("storage: compact: %w", err)
			}
		}
	}
	st.Keys = len(keys)
	var tombOldest uint64
	due := func(ts uint64) {
		if tombOldest == 0 || ts < tombOldest {
			tombOldest = max(ts, 1)
		}
	}
	// Oldest first, stopping at the first failure: a deletion marker is
	// only removed once every older segment lost the values it deletes.
	for _, s := range segs[:len(segs)-1] {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("storage: compact: %w", err)
		}
		cseg, ok, err := l.compactSegment(s, keys, nowUS, retention, due)
		if err != nil {
			return st, l.abandoned(s, err)
		}
		if ok {
			st.Segments = append(st.Segments, cseg)
		}
	}
	// Deletion markers in the active segment come due after it is sealed.
	for _, k := range keys {
		if k.deleted {
			due(k.ts)
		}
	}
	*cs = compactState{doneNext: next, purges: purges, tombOldest: tombOldest}
	return st, nil
}

// abandoned turns a failure on a segment that was dropped or purged
// meanwhile (or a log closed meanwhile) into a quiet end of the pass.
func (l *partitionLog) abandoned(s *segment, err error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	if !slices.Contains(l.segs, s) {
		return nil
	}
	return err
}

// compactSegment rewrites s keeping, per keyed message, only the latest of
// its key (a deletion marker only until retention passed), and every
// message without a key. ok is false when nothing had to go.
func (l *partitionLog) compactSegment(s *segment, keys map[string]latest, now, retention uint64, due func(uint64)) (cseg CompactedSegment, ok bool, err error) {
	cseg = CompactedSegment{BaseOffset: s.base, NextOffset: s.next, BytesBefore: s.size, MessagesBefore: s.msgs}
	out := make([]byte, fileHeaderSize, fileHeaderSize+int(s.size/2))
	var entries []entry
	var frames []frameInfo
	var buf []byte
	dropped := false
	var tombs []uint64
	for ei := range s.entries {
		if buf, frames, err = l.readFrames(s, ei, buf, frames[:0]); err != nil {
			return cseg, false, err
		}
		// Runs of kept frames become records of their own.
		for i := 0; i < len(frames); {
			if !keep(frames[i], keys, now, retention) {
				if frames[i].deleted {
					cseg.TombstonesRemoved++
				}
				dropped = true
				i++
				continue
			}
			j := i
			for j < len(frames) && keep(frames[j], keys, now, retention) {
				if frames[j].deleted {
					tombs = append(tombs, frames[j].ts)
				}
				j++
			}
			pos := int64(len(out))
			out = appendRun(out, buf, frames[i:j])
			entries = append(entries, entry{
				rel: uint32(frames[i].offset - s.base), count: uint32(j - i),
				length: uint32(int64(len(out)) - pos), pos: pos, ts: frames[i].ts,
			})
			i = j
		}
	}
	if !dropped {
		for _, ts := range tombs {
			due(ts)
		}
		return cseg, false, nil
	}
	ns := newSegment(s.base, nil, nil, s.path)
	ns.compacted = true
	for _, e := range entries {
		ns.add(e)
	}
	ns.next = s.next
	putFileHeaderV(out, logMagic, s.base, compactedVersion, uint32(s.next-s.base))
	idx := appendIndexOf(nil, ns)
	if err := l.switchSegment(s, ns, out, idx); err != nil {
		return cseg, false, err
	}
	for _, ts := range tombs {
		due(ts)
	}
	cseg.BytesAfter, cseg.MessagesAfter = ns.size, ns.msgs
	return cseg, true, nil
}

// keep decides one message's fate.
func keep(f frameInfo, keys map[string]latest, now, retention uint64) bool {
	if !f.keyed {
		return true
	}
	k, ok := keys[string(f.key)]
	if !ok || k.offset != f.offset {
		return !ok // superseded (a key never missing from keys: defensive)
	}
	return !f.deleted || f.ts+retention > now
}

// switchSegment makes ns (with the files' bytes logb and idxb) replace old,
// durably and atomically, unless old left the log meanwhile.
func (l *partitionLog) switchSegment(old, ns *segment, logb, idxb []byte) error {
	sb, ok := l.be.(stager)
	if !ok {
		return fmt.Errorf("storage: compact %s: this log's backend cannot compact", old.path)
	}
	st, err := sb.stage(old.base, logb, idxb)
	if err != nil {
		return fmt.Errorf("storage: compact %s: %w", old.path, err)
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	at := slices.Index(l.segs, old)
	if l.closed || at < 0 || at == len(l.segs)-1 {
		st.abort()
		return nil
	}
	crashPoint("staged")
	logf, idxf, err := st.commit()
	if err != nil {
		// The switch may have happened on disk: the old segment's files
		// are no longer trustworthy by name, so stop appending until the
		// log is reopened and recovery decides.
		l.failed = fmt.Errorf("storage: log unusable until reopened: compact %s: %w", old.path, err)
		return l.failed
	}
	ns.log, ns.idx = logf, idxf
	ns.idxLen = int64(len(idxb))
	l.mu.Lock()
	l.segs[at] = ns
	l.mu.Unlock()
	if err := old.closeFiles(); err != nil {
		l.opts.Logger.Warn("storage: closing a compacted segment's old files", "file", old.path, "err", err)
	}
	return nil
}

// frameInfo is one message of a record read for compaction.
type frameInfo struct {
	offset, ts       uint64
	start, end       int // frame bytes in the record
	key              []byte
	keyed, deleted   bool
	headersMalformed bool
}

// readFrames reads record ei of s into buf and describes its frames.
func (l *partitionLog) readFrames(s *segment, ei int, buf []byte, frames []frameInfo) ([]byte, []frameInfo, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return buf, frames, ErrClosed
	}
	e := s.entries[ei]
	buf = slices.Grow(buf[:0], int(e.length))[:e.length]
	err := readAt(s, ei, buf)
	l.mu.RUnlock()
	if err != nil {
		return buf, frames, err
	}
	h, _ := wire.DecodeBatchHeader(buf) // checked by readAt
	rest, pos := buf[wire.BatchHeaderSize:], wire.BatchHeaderSize
	for i := uint32(0); i < h.Count; i++ {
		fh, frame, r, err := wire.NextFrame(rest)
		if err != nil {
			return buf, frames, &CorruptError{Path: s.path, Pos: e.pos, Err: fmt.Errorf("message %d: %w", i, err)}
		}
		f := frameInfo{offset: h.BaseOffset + uint64(i), ts: h.BaseTimestamp, start: pos, end: pos + len(frame)}
		var herr error
		f.key, f.keyed, f.deleted, herr = KeyOf(frame[wire.MessageHeaderSize+fh.PayloadLength:])
		f.headersMalformed = herr != nil
		frames = append(frames, f)
		rest, pos = r, pos+len(frame)
	}
	return buf, frames, nil
}

// appendRun appends a record of the frames fs of record rec: base offset
// the first frame's, offset deltas renumbered from 0 (each frame checksum
// recomputed, since it covers the delta), the record's timestamps kept.
func appendRun(dst, rec []byte, fs []frameInfo) []byte {
	at := len(dst)
	dst = append(dst, rec[:wire.BatchHeaderSize]...)
	for i, f := range fs {
		fat := len(dst)
		dst = append(dst, rec[f.start:f.end]...)
		frame := dst[fat:]
		binary.LittleEndian.PutUint32(frame[24:], uint32(i))
		binary.LittleEndian.PutUint64(frame[0:], wire.FrameChecksum(frame))
	}
	out := dst[at:]
	h, _ := wire.DecodeBatchHeader(out)
	h.BaseOffset, h.Length, h.Count = fs[0].offset, uint64(len(out)), uint32(len(fs))
	h.Put(out)
	sum, _ := wire.RecordChecksum(out) // frames are well-formed: read and checked
	binary.LittleEndian.PutUint64(out[40:], sum)
	return dst
}

// KeyOf reads the compaction key of a message from its encoded user
// headers (the TLV of iggy/wire): the value bytes of the "key" header when
// it is a string or raw value, and whether a "deleted" header is the bool
// true. Headers that do not decode give keyed = false with an error: such
// a message is kept as it is.
func KeyOf(headers []byte) (key []byte, keyed, deleted bool, err error) {
	var seenKey, seenDeleted bool
	for off := 0; off < len(headers); {
		k, kkind, n, err := tlvItem(headers, off)
		if err != nil {
			return nil, false, false, err
		}
		v, vkind, m, err := tlvItem(headers, off+n)
		if err != nil {
			return nil, false, false, err
		}
		off += n + m
		if kkind != byte(wire.KindString) {
			continue
		}
		// The first header of a name counts, as header.Get reads it.
		switch string(k) {
		case keyHeader:
			if !seenKey && (vkind == byte(wire.KindString) || vkind == byte(wire.KindRaw)) {
				key, keyed = v, true
			}
			seenKey = true
		case deletedHeader:
			if !seenDeleted {
				deleted = vkind == byte(wire.KindBool) && len(v) == 1 && v[0] == 1
			}
			seenDeleted = true
		}
	}
	return key, keyed, deleted && keyed, nil
}

var errTLV = errors.New("user headers do not decode")

// tlvItem reads one kind-length-data item at off.
func tlvItem(b []byte, off int) (data []byte, kind byte, n int, err error) {
	if len(b)-off < 5 {
		return nil, 0, 0, fmt.Errorf("%w: %d bytes at %d, fewer than a kind and length", errTLV, len(b)-off, off)
	}
	kind, size := b[off], binary.LittleEndian.Uint32(b[off+1:])
	if kind == 0 || size == 0 || size > 255 || uint64(size) > uint64(len(b)-off-5) {
		return nil, 0, 0, fmt.Errorf("%w: item at %d: kind %d, length %d", errTLV, off, kind, size)
	}
	return b[off+5 : off+5+int(size)], kind, 5 + int(size), nil
}
