// Package storage is the durable append-only partition log of Ferry's
// embedded broker: one Log per partition, holding the batch records of
// iggy/wire exactly as the broker stamped them, split into segments, with
// an offset and time index, recovery after a crash, retention by whole
// segments (DropOldest) or all at once (Purge), and compaction of sealed
// segments to the latest message per key (Compact).
//
// It owns the bytes of a partition directory and nothing above them: the
// broker validates and stamps records (wire.BatchChecker), decides when to
// drop segments, and keeps consumer offsets elsewhere.
//
// Two implementations share one engine and one test suite: OpenFile keeps
// segments in files, NewMemory in memory (for tests and a broker with no
// data directory).
//
// # Concurrency
//
// A Log takes one appender and many readers at once. Append writes the
// record with pwrite outside the read lock and then publishes it under a
// short write lock; Read finds records in the in-memory index and reads them
// with pread (ReadAt) under the read lock, so a reader sees whole records
// only, and DropOldest never closes a file under a reader.
//
// # Appending
//
// Append validates the record again (wire.BatchChecker.Validate, about 15%
// of an append's CPU with 100-byte payloads, 4% with 1 KiB), so the log
// never acknowledges a record that recovery would later cut off. With
// Options.Fsync the .log is fsynced before Append returns; the index is
// written after the log and synced on Sync, Close and when the segment is
// sealed, since recovery can rebuild it. If a write fails, the file is cut
// back to where the record began; if even that fails, Append keeps failing
// until the log is reopened (or purged).
//
// # Files (format version 1)
//
// A partition directory holds, per segment, NAME.log and NAME.index, where
// NAME is the segment's base offset in 20 decimal digits
// (00000000000000001000.log), and a LOCK file held with flock while the log
// is open (a second OpenFile of the directory, from this process or
// another, fails with ErrLocked). Other files are ignored. All integers are
// little-endian.
//
// Both segment files start with a 24-byte header:
//
//	0  8  magic "FERRYLOG" (.log) or "FERRYIDX" (.index)
//	8  4  format version u32 (1)
//	12 4  reserved: written as zero; ignored in a .log, rejected in a .index
//	16 8  base offset u64, equal to the one in the file name
//
// The .log file continues with the records back to back, each exactly as
// appended: a 256-byte batch header and its message frames, batch_length
// bytes in all. The first record's base_offset is the segment's base offset
// and each next one is the previous base_offset plus its message_count.
//
// The .index file continues with one 32-byte entry per record, in order:
//
//	0  4  relative offset u32 (base_offset - segment base offset)
//	4  4  message count u32
//	8  8  file position u64 of the record in the .log
//	16 8  base_timestamp u64 (µs)
//	24 4  record length u32
//	28 4  low 32 bits of XXH3-64 over bytes 0..28 of the entry
//
// A segment is rolled when its records reach Options.SegmentSize bytes or
// its relative offsets would pass 2^32. The rolled segment is fsynced (log
// and index) before the new one is created, and creating a segment fsyncs
// both new files and the directory, with or without Options.Fsync.
//
// # Compacted segments (version 1 with the compacted flag)
//
// Compact rewrites sealed segments; their files carry version 0x00010001
// (version 1 with bit 16, the compacted flag, set), which a build without
// compaction refuses with ErrFormat instead of reading gaps as damage. The
// layout is version 1's, with two differences: header bytes 12..16 hold
// the segment's end as a relative offset (NextOffset - base offset; its
// last messages may be gone), in the .log and the .index alike, and a
// record may start past the end of the one before (the gap is the
// compacted offsets); every record still ends within the end. Each record
// is a run of consecutive surviving messages of one original record: its
// base_offset is its first message's offset, offset deltas are renumbered
// from 0 (so frame checksums and the batch checksum are recomputed), and
// the base and origin timestamps stay. Appends never go to a compacted
// segment.
//
// # Compaction
//
// Compact reads every record of the log (sealed segments and the active
// one up to the moment it starts) and keeps, per key, the offset of its
// latest message. The key is the value bytes of the user header "key"
// when it is a string or raw value (iggy.KeyHeader; KeyOf reads it from
// the stored frame); a deletion marker also has "deleted" = bool true.
// Then, oldest first, each sealed segment holding a message that is not
// its key's latest, or a deletion marker appended more than
// CompactOptions.TombstoneRetention ago, is rewritten keeping the rest.
// Messages without a key, or whose headers do not decode, are always
// kept. The active segment is never rewritten. Segments are rewritten
// one for one (small compacted segments are not merged), offsets never
// change, and a pass stops at its first failure so a deletion marker goes
// only after every older value of its key went. A pass is skipped when
// nothing was appended and no deletion marker came due since the last.
//
// Crash safety: the new segment is written to NAME.log.compact and
// NAME.index.compact and fsynced, with no lock held; then, under the
// append lock (and only if the segment is still in the log), the .log is
// renamed over the old one, then the .index, and the directory fsynced.
// Each rename is atomic, so each file is wholly old or new; a new .log
// beside the old .index disagrees with its header (version or end), so
// recovery rebuilds the index from the log. OpenFile deletes
// NAME.*.compact files: a compaction that never switched. Readers hold
// the read lock while they read, and the segment is swapped in the
// segment list under the write lock, so a reader sees the old segment or
// the new one, never a mix; the old files are closed after the swap.
// Tested: a reference of 1M messages over 10,000 keys (100k under -short
// and -race), kill -9 ten times at each crash point or a random moment,
// concurrent appends and reads under -race, fuzzed recovery of compacted
// files, KeyOf fuzzed against wire.ParseTLV. A survivor whose
// neighbours went becomes a record of its own, so each run of survivors
// costs a 256-byte record header (a 100-byte message then takes about 3.5
// times its size). Left out: merging small segments, records that span
// gaps, an incremental key map (every pass reads the whole log and
// holds every distinct key in memory), size or dirty-ratio triggers.
//
// # Recovery
//
// The .log is the truth; the index is a cache that is never fatal. OpenFile:
//
//   - Sealed (older) segments are trusted through their index when every
//     entry's checksum holds, the entries tile the log gap-free to its exact
//     size, and the first and last record headers agree with their entries.
//     Otherwise the log is scanned and the index rewritten.
//   - The active (last) segment is always scanned: each record must have a
//     whole header, a batch_length that fits, frames that pass
//     wire.BatchChecker.Validate (frame checksums and the batch checksum,
//     recomputed the way wire.RecordChecksum does), and the next contiguous
//     base_offset. The file is cut at the first record that fails, which is
//     how a write torn by a crash disappears, and the index is rewritten if
//     it differs in any byte from the scanned records. A header that is
//     missing or all zero (a crash while creating the segment) is rewritten.
//   - Segments must be contiguous: each starts where the one before ends.
//   - Index files without a .log are deleted; a .log without an index gets
//     one.
//
// Damage that is not a torn tail (a bad record inside a sealed segment, a
// sealed segment without a header, a header with the wrong magic or base
// offset, a gap between segments) is never served and never cut silently:
// OpenFile fails with a *CorruptError naming the file and byte position
// (errors.Is(err, ErrCorrupt)). The operator may then reopen with
// Options.TruncateCorrupt, which cuts the log at that point and deletes
// every later segment, logging what it removed; offsets after the cut are
// given out again. Reads double-check each record header they read against
// the index, and validate completely (checksums included), once per
// process, each record of a sealed segment that was trusted through its
// index; a record that fails is never served: Read returns the records
// before it and a *CorruptError naming the file and position.
// A file of a newer format version fails with ErrFormat and is not touched.
//
// # Changing the format (migration recipe)
//
// Never change what version 1 means. To change the layout:
//
//  1. Bump formatVersion and describe version N above, next to version 1.
//  2. Keep readers for every older version: checkFileHeader must accept
//     them, and openSegment must decode them (scanLog for the .log,
//     parseIndex for the .index). A build that meets a newer version keeps
//     failing with ErrFormat, so a downgrade never destroys data.
//  3. Write only the newest version, and only to new segments: when
//     OpenFile finds an older version in the active segment, the first
//     Append rolls to a new segment, so no file mixes versions and none is
//     rewritten in place; old segments keep their version until DropOldest
//     or Purge removes them. An index-only change needs none of this: old
//     indexes can simply be rebuilt from their logs on open.
//  4. Add the old version's files as seeds under testdata/fuzz and a test
//     that opens a directory holding both versions.
package storage
