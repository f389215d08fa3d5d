package broker

// metadata.json holds everything but messages and offsets: streams, topics
// (options, created_at, partition created_at list, group ids and names,
// the next group id) and users (argon2id password hashes, permissions,
// PAT hashes). It is JSON so an operator can read it, and 0600 because of
// the hashes.
//
// Layout under DataDir:
//
//	LOCK                                  held while a broker runs
//	metadata.json
//	topics/<uid>/<partition id>/log/      partition log (broker/storage)
//	topics/<uid>/<partition id>/offsets   consumer offsets journal (persist.go)
//
// A topic's directory is named by a uid that is never reused, so a stream
// or topic id reused after a delete never meets old files. At startup,
// topic directories no longer named by metadata.json and partition
// directories at or past their topic's partition count (a crash between
// saving metadata and removing files) are deleted, and a new partition
// always starts from an empty directory. A data directory whose
// metadata.json is missing but whose topics/ is not empty is refused
// rather than wiped. Stored consumer offsets past the end of their log are
// brought back to it when a partition opens.
//
// Format changes: bump metaVersion, teach decodeMeta the old version and
// convert it on load; the next save writes the new one. Version 1 had no
// users and its PATs were root's: it loads with no users (so root is made
// from the configured credentials) and those PATs given to root.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ferryhq/ferry/broker/storage"
	"github.com/ferryhq/ferry/iggy/wire"
)

const (
	metaVersion  = 2
	metaFileName = "metadata.json"
	// maxPartitions bounds a topic's partitions in a metadata file.
	maxPartitions = 1 << 20
)

type metaFile struct {
	Version    int          `json:"version"`
	NextUID    uint64       `json:"next_uid"`
	Streams    []metaStream `json:"streams"`
	NextUserID uint32       `json:"next_user_id"`
	Users      []metaUser   `json:"users"`
	// PATs are version 1's (root's); version 2 keeps them with each user.
	PATs []metaPAT `json:"personal_access_tokens,omitempty"`
}

type metaStream struct {
	ID        uint32      `json:"id"`
	Name      string      `json:"name"`
	CreatedAt uint64      `json:"created_at"`
	Topics    []metaTopic `json:"topics"`
}

type metaTopic struct {
	ID          uint32            `json:"id"`
	UID         uint64            `json:"uid"`
	Name        string            `json:"name"`
	CreatedAt   uint64            `json:"created_at"`
	Options     wire.TopicOptions `json:"options"`
	Partitions  []uint64          `json:"partitions_created_at"`
	NextGroupID uint32            `json:"next_group_id"`
	Groups      []metaGroup       `json:"consumer_groups"`
}

type metaGroup struct {
	ID   uint32 `json:"id"`
	Name string `json:"name"`
}

type metaPAT struct {
	Name      string `json:"name"`
	SHA256    string `json:"sha256"`
	ExpiresAt uint64 `json:"expires_at"`
}

// snapshotMeta captures the model. Caller holds b.mu.
func (b *Broker) snapshotMeta() metaFile {
	m := metaFile{Version: metaVersion, NextUID: b.nextUID, Streams: []metaStream{},
		NextUserID: b.nextUserID, Users: b.snapshotUsers()}
	for _, sid := range sortedKeys(b.streams) {
		s := b.streams[sid]
		ms := metaStream{ID: s.id, Name: s.name, CreatedAt: s.createdAt, Topics: []metaTopic{}}
		for _, tid := range sortedKeys(s.topics) {
			t := s.topics[tid]
			mt := metaTopic{
				ID: t.id, UID: t.uid, Name: t.name, CreatedAt: t.createdAt, Options: t.opts,
				Partitions: []uint64{}, NextGroupID: t.nextGroup, Groups: []metaGroup{},
			}
			for _, p := range t.parts {
				mt.Partitions = append(mt.Partitions, p.createdAt)
			}
			for _, gid := range sortedKeys(t.groups) {
				mt.Groups = append(mt.Groups, metaGroup{ID: gid, Name: t.groups[gid].name})
			}
			ms.Topics = append(ms.Topics, mt)
		}
		m.Streams = append(m.Streams, ms)
	}
	return m
}

// saveMeta writes metadata.json atomically (a no-op in memory). Caller
// holds b.mu for writing, so saves are serialized and match the model.
func (b *Broker) saveMeta() error {
	if b.cfg.DataDir == "" {
		return nil
	}
	data, err := json.MarshalIndent(b.snapshotMeta(), "", " ")
	if err != nil {
		return fmt.Errorf("encode metadata: %w", err)
	}
	return b.cfg.writeMeta(filepath.Join(b.cfg.DataDir, metaFileName), data)
}

// decodeMeta parses and checks a metadata file.
func decodeMeta(data []byte) (metaFile, error) {
	var m metaFile
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("decode metadata: %w", err)
	}
	if m.Version != 1 && m.Version != metaVersion {
		return m, fmt.Errorf("metadata version %d, this build reads 1 and %d", m.Version, metaVersion)
	}
	if m.Version == 2 && len(m.PATs) > 0 {
		return m, errors.New("metadata version 2 has personal access tokens outside its users")
	}
	sids := map[uint32]bool{}
	uids := map[uint64]bool{}
	for _, s := range m.Streams {
		if sids[s.ID] || s.Name == "" || len(s.Name) > 255 {
			return m, fmt.Errorf("metadata: stream %d: duplicate id or bad name %q", s.ID, s.Name)
		}
		sids[s.ID] = true
		tids := map[uint32]bool{}
		for _, t := range s.Topics {
			switch {
			case tids[t.ID] || t.Name == "" || len(t.Name) > 255:
				return m, fmt.Errorf("metadata: stream %d topic %d: duplicate id or bad name %q", s.ID, t.ID, t.Name)
			case uids[t.UID] || t.UID >= m.NextUID:
				return m, fmt.Errorf("metadata: stream %d topic %d: uid %d reused or not below next_uid %d", s.ID, t.ID, t.UID, m.NextUID)
			case len(t.Partitions) > maxPartitions:
				return m, fmt.Errorf("metadata: stream %d topic %d: %d partitions", s.ID, t.ID, len(t.Partitions))
			case t.Options.SegmentSize == 0 || t.Options.SegmentSize > 1<<30:
				return m, fmt.Errorf("metadata: stream %d topic %d: segment size %d", s.ID, t.ID, t.Options.SegmentSize)
			}
			tids[t.ID], uids[t.UID] = true, true
			gids := map[uint32]bool{}
			for _, g := range t.Groups {
				if gids[g.ID] || g.ID >= t.NextGroupID || g.Name == "" || len(g.Name) > 255 {
					return m, fmt.Errorf("metadata: stream %d topic %d group %d: duplicate id, id not below next %d, or bad name", s.ID, t.ID, g.ID, t.NextGroupID)
				}
				gids[g.ID] = true
			}
		}
	}
	if err := checkMetaPATs(m.PATs); err != nil {
		return m, fmt.Errorf("metadata: %w", err)
	}
	if err := checkMetaUsers(m.Users, m.NextUserID); err != nil {
		return m, err
	}
	return m, nil
}

func (b *Broker) topicDir(uid uint64) string {
	return filepath.Join(b.cfg.DataDir, "topics", strconv.FormatUint(uid, 10))
}

// fsyncEach reports whether t's writes are fsynced before their reply.
func (b *Broker) fsyncEach(t *topic) bool {
	return t.opts.EnforceFsync || b.cfg.Fsync == FsyncAlways
}

// openPartition opens partition id of t: a new one (fresh) starts from an
// empty directory, whatever a crash or a failed delete left there; an
// existing one is recovered.
func (b *Broker) openPartition(t *topic, id uint32, createdAt uint64, fresh bool) (*partition, error) {
	p := &partition{topic: t, id: id, createdAt: createdAt, ids: newDedupIDs(b.cfg.Dedup)}
	opts := storage.Options{SegmentSize: t.opts.SegmentSize, Fsync: b.fsyncEach(t), Logger: b.log}
	if b.cfg.DataDir == "" {
		p.log = storage.NewMemory(opts)
		p.offsets = &offsetStore{m: map[offsetKey]uint64{}}
		return p, nil
	}
	p.dir = filepath.Join(b.topicDir(t.uid), strconv.FormatUint(uint64(id), 10))
	if fresh {
		if _, err := os.Stat(p.dir); err == nil {
			b.log.Warn("removing old files where a new partition goes", "dir", p.dir)
		}
		if err := removeAll(p.dir); err != nil {
			return nil, fmt.Errorf("create partition %d of topic %q: %w", id, t.name, err)
		}
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create partition directory: %w", err)
	}
	log, err := storage.OpenFile(filepath.Join(p.dir, "log"), opts)
	if err != nil {
		return nil, fmt.Errorf("open partition %d of topic %q: %w", id, t.name, err)
	}
	j, offs, err := openJournal(filepath.Join(p.dir, "offsets"), b.fsyncEach(t), b.log)
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("open partition %d of topic %q: %w", id, t.name, err)
	}
	p.log, p.offsets = log, &offsetStore{m: offs, j: j}
	for _, s := range log.Segments() {
		p.lastTS = max(p.lastTS, s.LastTimestamp)
	}
	p.clampOffsets(b.log)
	return p, nil
}

// clampOffsets keeps every stored offset within the log: an offset past
// the last message (the log lost its tail: a purge or a repair cut it, or
// files were restored) comes down to the last offset, or is dropped when
// the log is empty. A stored offset past the log would make "next" skip
// the messages given those offsets again.
func (p *partition) clampOffsets(log *slog.Logger) {
	next := p.log.NextOffset()
	changed := false
	for k, v := range p.offsets.m {
		switch {
		case next == 0:
			delete(p.offsets.m, k)
		case v >= next:
			p.offsets.m[k] = next - 1
		default:
			continue
		}
		changed = true
		log.Warn("consumer offset past the end of the log", "dir", p.dir,
			"consumer_kind", k.Kind, "consumer_id", k.ID, "offset", v, "next_offset", next)
	}
	if changed {
		if err := p.offsets.j.compact(p.offsets.m); err != nil {
			log.Warn("saving clamped consumer offsets failed; they are clamped again at the next start",
				"dir", p.dir, "err", err)
		}
	}
}

// close closes the partition's files.
func (p *partition) close() error {
	p.mu.Lock() // waits for an append in progress
	err := p.log.Close()
	p.mu.Unlock()
	p.offMu.Lock()
	jerr := p.offsets.j.close()
	p.offMu.Unlock()
	return errors.Join(err, jerr)
}

// destroy closes the partition and deletes its files.
func (p *partition) destroy() error {
	err := p.close()
	if p.dir != "" {
		err = errors.Join(err, removeAll(p.dir))
	}
	return err
}

func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// recover loads DataDir: metadata, then every partition through storage.
func (b *Broker) recover(ctx context.Context) error {
	b.nextUID = 1
	if b.cfg.DataDir == "" {
		_, err := b.bootstrapRoot()
		return err
	}
	if err := os.MkdirAll(filepath.Join(b.cfg.DataDir, "topics"), 0o755); err != nil {
		return fmt.Errorf("broker: data dir: %w", err)
	}
	lock, err := lockDataDir(b.cfg.DataDir)
	if err != nil {
		return err
	}
	b.dirLock = lock
	data, err := os.ReadFile(filepath.Join(b.cfg.DataDir, metaFileName))
	if errors.Is(err, os.ErrNotExist) {
		// A new data directory, or one whose metadata was lost: never wipe
		// topic data on a guess.
		topics := filepath.Join(b.cfg.DataDir, "topics")
		entries, rerr := os.ReadDir(topics)
		if rerr != nil {
			return fmt.Errorf("broker: read %s: %w", topics, rerr)
		}
		if len(entries) > 0 {
			return fmt.Errorf("broker: %s is missing but %s holds %d topic directories; restore the metadata file, or move the directory away to start empty",
				filepath.Join(b.cfg.DataDir, metaFileName), topics, len(entries))
		}
		// Written now, so that from here on a missing file means a lost one.
		if _, err := b.bootstrapRoot(); err != nil {
			return err
		}
		return b.saveMeta()
	}
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	m, err := decodeMeta(data)
	if err != nil {
		return fmt.Errorf("broker: %s: %w", filepath.Join(b.cfg.DataDir, metaFileName), err)
	}
	b.nextUID = m.NextUID
	live := map[string]bool{}
	for _, ms := range m.Streams {
		s := &stream{id: ms.ID, name: ms.Name, createdAt: ms.CreatedAt, topics: map[uint32]*topic{}}
		b.streams[s.id] = s
		for _, mt := range ms.Topics {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("broker: recovery: %w", err)
			}
			t := &topic{
				stream: s, id: mt.ID, uid: mt.UID, name: mt.Name, createdAt: mt.CreatedAt,
				opts: mt.Options, groups: map[uint32]*group{}, nextGroup: mt.NextGroupID,
			}
			s.topics[t.id] = t
			live[strconv.FormatUint(t.uid, 10)] = true
			for i, created := range mt.Partitions {
				p, err := b.openPartition(t, uint32(i), created, false)
				if err != nil {
					return fmt.Errorf("broker: recovery: %w", err)
				}
				t.parts = append(t.parts, p)
			}
			if err := b.removeDeletedPartitions(t); err != nil {
				return err
			}
			for _, mg := range mt.Groups {
				t.groups[mg.ID] = newGroup(t, mg.ID, mg.Name)
			}
		}
	}
	b.restoreUsers(m.Users, m.NextUserID)
	changed, err := b.bootstrapRoot()
	if err != nil {
		return err
	}
	if len(m.PATs) > 0 { // version 1: root's
		b.users[rootUserID].pats = restorePATs(m.PATs)
	}
	if changed || m.Version != metaVersion {
		if err := b.saveMeta(); err != nil {
			return fmt.Errorf("broker: save %s: %w", filepath.Join(b.cfg.DataDir, metaFileName), err)
		}
	}
	return b.removeOrphans(live)
}

// removeDeletedPartitions deletes the partition directories of t whose id
// is at or past its partition count: delete_partitions saved metadata and
// crashed before removing them. Left there, a later create_partitions would
// find their messages and offsets.
func (b *Broker) removeDeletedPartitions(t *topic) error {
	dir := b.topicDir(t.uid)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("broker: read %s: %w", dir, err)
	}
	for _, e := range entries {
		id, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || id < uint64(len(t.parts)) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b.log.Warn("removing the directory of a deleted partition", "dir", path)
		if err := removeAll(path); err != nil {
			return fmt.Errorf("broker: recovery: %w", err)
		}
	}
	return nil
}

// removeOrphans deletes topic directories metadata does not name.
func (b *Broker) removeOrphans(live map[string]bool) error {
	dir := filepath.Join(b.cfg.DataDir, "topics")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("broker: read %s: %w", dir, err)
	}
	for _, e := range entries {
		if !live[e.Name()] {
			b.log.Warn("removing a topic directory metadata does not name", "dir", filepath.Join(dir, e.Name()))
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("broker: remove orphan: %w", err)
			}
		}
	}
	return nil
}

// closeLogs closes every partition (Close, failed Start).
func (b *Broker) closeLogs() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, s := range b.streams {
		for _, t := range s.topics {
			for _, p := range t.parts {
				if err := p.close(); err != nil && !errors.Is(err, storage.ErrClosed) {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}
