package wire

// Users and permissions (codes 31-37): request bodies, the user replies
// and the permissions blob, as the upstream server encodes them.
//
// Permissions blob: ten global flags (manage_servers, read_servers,
// manage_users, read_users, manage_streams, read_streams, manage_topics,
// read_topics, poll_messages, send_messages), then [has_streams u8]; each
// stream is [id u32] + six flags (manage_stream, read_stream,
// manage_topics, read_topics, poll_messages, send_messages) +
// [has_topics u8] + topics ([id u32] + four flags (manage_topic,
// read_topic, poll_messages, send_messages) + [has_next_topic u8]) +
// [has_next_stream u8]. Requests and replies wrap it as
// [1][len u32][blob]; "no permissions" is a 0 flag. Maps are written in
// id order and an empty map as a 0 flag (upstream's Rust writes 1 with no
// entries for an empty map, which its own decoder cannot read). Flags
// inside the blob read as set when non-zero, as the new server reads them.

import "sort"

// UserStatus is a user's status: 1 active, 2 inactive.
type UserStatus uint8

const (
	UserActive   UserStatus = 1
	UserInactive UserStatus = 2
)

func (s UserStatus) String() string {
	switch s {
	case UserActive:
		return "active"
	case UserInactive:
		return "inactive"
	}
	return "unknown"
}

// Valid reports whether s is active or inactive.
func (s UserStatus) Valid() bool { return s == UserActive || s == UserInactive }

// userStatus reads a status byte; another value fails the decode
// (upstream answers InvalidCommand).
func (d *Decoder) userStatus(field string) UserStatus {
	s := UserStatus(d.U8(field))
	if d.Err() == nil && !s.Valid() {
		d.Failf("%s %d is neither 1 (active) nor 2 (inactive)", field, s)
	}
	return s
}

// GlobalPermissions are a user's rights over the whole server.
type GlobalPermissions struct {
	ManageServers bool `json:"manage_servers,omitempty"`
	ReadServers   bool `json:"read_servers,omitempty"`
	ManageUsers   bool `json:"manage_users,omitempty"`
	ReadUsers     bool `json:"read_users,omitempty"`
	ManageStreams bool `json:"manage_streams,omitempty"`
	ReadStreams   bool `json:"read_streams,omitempty"`
	ManageTopics  bool `json:"manage_topics,omitempty"`
	ReadTopics    bool `json:"read_topics,omitempty"`
	PollMessages  bool `json:"poll_messages,omitempty"`
	SendMessages  bool `json:"send_messages,omitempty"`
}

// StreamPermissions are a user's rights on one stream and, through Topics,
// on some of its topics.
type StreamPermissions struct {
	ManageStream bool                         `json:"manage_stream,omitempty"`
	ReadStream   bool                         `json:"read_stream,omitempty"`
	ManageTopics bool                         `json:"manage_topics,omitempty"`
	ReadTopics   bool                         `json:"read_topics,omitempty"`
	PollMessages bool                         `json:"poll_messages,omitempty"`
	SendMessages bool                         `json:"send_messages,omitempty"`
	Topics       map[uint32]*TopicPermissions `json:"topics,omitempty"` // by topic id; nil = none
}

// TopicPermissions are a user's rights on one topic.
type TopicPermissions struct {
	ManageTopic  bool `json:"manage_topic,omitempty"`
	ReadTopic    bool `json:"read_topic,omitempty"`
	PollMessages bool `json:"poll_messages,omitempty"`
	SendMessages bool `json:"send_messages,omitempty"`
}

// Permissions are a user's rights: global ones and per stream.
type Permissions struct {
	Global  GlobalPermissions             `json:"global"`
	Streams map[uint32]*StreamPermissions `json:"streams,omitempty"` // by stream id; nil = none
}

// AllPermissions are the root user's: every global flag.
func AllPermissions() *Permissions {
	return &Permissions{Global: GlobalPermissions{true, true, true, true, true, true, true, true, true, true}}
}

func appendFlags(b []byte, flags ...bool) []byte {
	for _, f := range flags {
		b = appendBool(b, f)
	}
	return b
}

// AppendTo appends the permissions blob (without the [1][len] wrapper).
func (p *Permissions) AppendTo(b []byte) []byte {
	g := p.Global
	b = appendFlags(b, g.ManageServers, g.ReadServers, g.ManageUsers, g.ReadUsers, g.ManageStreams,
		g.ReadStreams, g.ManageTopics, g.ReadTopics, g.PollMessages, g.SendMessages)
	sids := sortedIDs(p.Streams)
	b = appendBool(b, len(sids) > 0)
	for i, sid := range sids {
		s := p.Streams[sid]
		b = appendU32(b, sid)
		b = appendFlags(b, s.ManageStream, s.ReadStream, s.ManageTopics, s.ReadTopics, s.PollMessages, s.SendMessages)
		tids := sortedIDs(s.Topics)
		b = appendBool(b, len(tids) > 0)
		for j, tid := range tids {
			t := s.Topics[tid]
			b = appendU32(b, tid)
			b = appendFlags(b, t.ManageTopic, t.ReadTopic, t.PollMessages, t.SendMessages)
			b = appendBool(b, j < len(tids)-1)
		}
		b = appendBool(b, i < len(sids)-1)
	}
	return b
}

// flag reads a permission flag: any non-zero byte is set.
func (d *Decoder) flag(field string) bool { return d.U8(field) != 0 }

// DecodeFrom implements Decodable.
func (p *Permissions) DecodeFrom(d *Decoder) {
	g := &p.Global
	for _, f := range []*bool{&g.ManageServers, &g.ReadServers, &g.ManageUsers, &g.ReadUsers, &g.ManageStreams,
		&g.ReadStreams, &g.ManageTopics, &g.ReadTopics, &g.PollMessages, &g.SendMessages} {
		*f = d.flag("global permission")
	}
	p.Streams = nil
	for more := d.flag("has streams"); more && d.Err() == nil; more = d.flag("has next stream") {
		sid := d.U32("stream id")
		s := &StreamPermissions{}
		for _, f := range []*bool{&s.ManageStream, &s.ReadStream, &s.ManageTopics, &s.ReadTopics, &s.PollMessages, &s.SendMessages} {
			*f = d.flag("stream permission")
		}
		for moreT := d.flag("has topics"); moreT && d.Err() == nil; moreT = d.flag("has next topic") {
			tid := d.U32("topic id")
			t := &TopicPermissions{}
			for _, f := range []*bool{&t.ManageTopic, &t.ReadTopic, &t.PollMessages, &t.SendMessages} {
				*f = d.flag("topic permission")
			}
			if s.Topics == nil {
				s.Topics = map[uint32]*TopicPermissions{}
			}
			if _, dup := s.Topics[tid]; dup {
				d.Failf("stream %d lists topic %d twice", sid, tid)
			}
			s.Topics[tid] = t
		}
		if p.Streams == nil {
			p.Streams = map[uint32]*StreamPermissions{}
		}
		if _, dup := p.Streams[sid]; dup {
			d.Failf("stream %d is listed twice", sid)
		}
		p.Streams[sid] = s
	}
}

func sortedIDs[V any](m map[uint32]V) []uint32 {
	ids := make([]uint32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// appendOptPermissions appends [1][len u32][blob], or [0] for nil.
func appendOptPermissions(b []byte, p *Permissions) []byte {
	if p == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	at := len(b)
	b = appendU32(b, 0)
	b = p.AppendTo(b)
	putU32(b[at:], uint32(len(b)-at-4))
	return b
}

// optPermissions reads [has u8] and, when set, [len u32][blob]; the blob
// must fill its length exactly.
func (d *Decoder) optPermissions() *Permissions {
	if !d.Bool("has permissions") {
		return nil
	}
	blob := d.Bytes(int(d.U32("permissions length")), "permissions")
	if d.Err() != nil {
		return nil
	}
	p := &Permissions{}
	if err := Unmarshal(blob, p); err != nil {
		d.Fail(err)
		return nil
	}
	return p
}

// UserRef is the body of get_user (31) and delete_user (34).
type UserRef struct{ User Identifier }

func (r *UserRef) AppendTo(b []byte) []byte { return r.User.AppendTo(b) }
func (r *UserRef) DecodeFrom(d *Decoder)    { r.User = d.Identifier("user id") }

// CreateUser is the body of create_user (33).
type CreateUser struct {
	Username, Password string
	Status             UserStatus
	Permissions        *Permissions // nil = none
}

// AppendTo writes no length after a 0 permissions flag, as the Go SDK and
// upstream's CLI do; DecodeFrom ignores the 4 zero bytes newer encoders
// add there, as trailing bytes.
func (r *CreateUser) AppendTo(b []byte) []byte {
	b = appendString8(appendString8(b, r.Username), r.Password)
	b = append(b, byte(r.Status))
	return appendOptPermissions(b, r.Permissions)
}

func (r *CreateUser) DecodeFrom(d *Decoder) {
	r.Username = d.String8("username")
	r.Password = d.String8("password")
	r.Status = d.userStatus("status")
	r.Permissions = d.optPermissions()
}

// UpdateUser is the body of update_user (35): a new username, a new
// status, or both.
type UpdateUser struct {
	User     Identifier
	Username *string
	Status   *UserStatus
}

func (r *UpdateUser) AppendTo(b []byte) []byte {
	b = r.User.AppendTo(b)
	b = appendBool(b, r.Username != nil)
	if r.Username != nil {
		b = appendString8(b, *r.Username)
	}
	b = appendBool(b, r.Status != nil)
	if r.Status != nil {
		b = append(b, byte(*r.Status))
	}
	return b
}

func (r *UpdateUser) DecodeFrom(d *Decoder) {
	r.User = d.Identifier("user id")
	r.Username, r.Status = nil, nil
	if d.Bool("has username") {
		name := d.String8("username")
		r.Username = &name
	}
	if d.Bool("has status") {
		s := d.userStatus("status")
		r.Status = &s
	}
}

// UpdatePermissions is the body of update_permissions (36); nil
// Permissions removes them all.
type UpdatePermissions struct {
	User        Identifier
	Permissions *Permissions
}

func (r *UpdatePermissions) AppendTo(b []byte) []byte {
	return appendOptPermissions(r.User.AppendTo(b), r.Permissions)
}

func (r *UpdatePermissions) DecodeFrom(d *Decoder) {
	r.User = d.Identifier("user id")
	r.Permissions = d.optPermissions()
}

// ChangePassword is the body of change_password (37).
type ChangePassword struct {
	User                     Identifier
	CurrentPassword, NewPass string
}

func (r *ChangePassword) AppendTo(b []byte) []byte {
	return appendString8(appendString8(r.User.AppendTo(b), r.CurrentPassword), r.NewPass)
}

func (r *ChangePassword) DecodeFrom(d *Decoder) {
	r.User = d.Identifier("user id")
	r.CurrentPassword = d.String8("current password")
	r.NewPass = d.String8("new password")
}

// UserInfo is one user of get_users (32), and the head of UserDetails:
// [id u32][created_at u64][status u8][username_len u8][username].
type UserInfo struct {
	ID        uint32
	CreatedAt uint64 // µs since the epoch
	Status    UserStatus
	Username  string
}

func (u *UserInfo) AppendTo(b []byte) []byte {
	b = appendU64(appendU32(b, u.ID), u.CreatedAt)
	return appendString8(append(b, byte(u.Status)), u.Username)
}

func (u *UserInfo) DecodeFrom(d *Decoder) {
	u.ID = d.U32("user id")
	u.CreatedAt = d.U64("created at")
	u.Status = UserStatus(d.U8("status"))
	u.Username = d.Name("username")
}

// UserList is the reply of get_users (32): entries back to back.
type UserList []UserInfo

func (l *UserList) AppendTo(b []byte) []byte {
	for i := range *l {
		b = (*l)[i].AppendTo(b)
	}
	return b
}

func (l *UserList) DecodeFrom(d *Decoder) {
	*l = UserList{}
	for d.Remaining() > 0 && d.Err() == nil {
		var u UserInfo
		u.DecodeFrom(d)
		*l = append(*l, u)
	}
}

// UserDetails is the reply of get_user (31) and create_user (33): the
// user, then [1][len u32][permissions] or, without permissions, four zero
// bytes (upstream writes a u32 0 there; readers look at the first byte).
type UserDetails struct {
	UserInfo
	Permissions *Permissions
}

func (u *UserDetails) AppendTo(b []byte) []byte {
	b = u.UserInfo.AppendTo(b)
	if u.Permissions == nil {
		return appendU32(b, 0)
	}
	return appendOptPermissions(b, u.Permissions)
}

func (u *UserDetails) DecodeFrom(d *Decoder) {
	u.UserInfo.DecodeFrom(d)
	if d.Remaining() > 0 && d.b[d.off] == 0 {
		d.Bytes(min(4, d.Remaining()), "no permissions")
		u.Permissions = nil
		return
	}
	u.Permissions = d.optPermissions()
}
