package broker

import (
	"errors"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/zeebo/xxh3"
)

// request is one decoded request on its way through dispatch. body aliases
// the connection's read buffer and is valid until the handler returns.
type request struct {
	c    *conn
	h    wire.RequestHeader
	body []byte
}

// cmd is the command the request stands for: the code at header offset
// 196 for NonReplicated, else the command of the replicated operation.
func (r *request) cmd() wire.Command { return r.h.Command }

type handler func(b *Broker, r *request) reply

// nonReplicated maps the codes sent with operation NonReplicated to their
// handlers. Known codes missing here are answered by dispatch's rules.
var nonReplicated = map[wire.Command]handler{
	wire.CmdPing:               handlePing,
	wire.CmdGetStats:           handleGetStats,
	wire.CmdGetSnapshot:        handleGetSnapshot,
	wire.CmdGetClusterMetadata: handleGetClusterMetadata,
	wire.CmdDescribeOptions:    handleDescribeOptions,
	wire.CmdGetMe:              handleGetMe,
	wire.CmdGetClient:          handleGetClient,
	wire.CmdGetClients:         handleGetClients,
	wire.CmdGetUser:            handleGetUser,
	wire.CmdGetUsers:           handleGetUsers,
	wire.CmdGetPATs:            handleGetPATs,
	wire.CmdPollMessages:       handlePoll,
	wire.CmdFlushUnsavedBuffer: handleFlushUnsavedBuffer,
	wire.CmdGetConsumerOffset:  handleGetConsumerOffset,
	wire.CmdGetStream:          handleGetStream,
	wire.CmdGetStreams:         handleGetStreams,
	wire.CmdGetTopic:           handleGetTopic,
	wire.CmdGetTopics:          handleGetTopics,
	wire.CmdGetConsumerGroup:   handleGetConsumerGroup,
	wire.CmdGetConsumerGroups:  handleGetConsumerGroups,
	wire.CmdSyncConsumerGroup:  handleSyncConsumerGroup,
}

// replicated maps metadata and partition operations to their handlers.
var replicated = map[wire.Operation]handler{
	wire.OpCreateStream:         handleCreateStream,
	wire.OpUpdateStream:         handleUpdateStream,
	wire.OpDeleteStream:         handleDeleteStream,
	wire.OpPurgeStream:          handlePurgeStream,
	wire.OpCreateTopic:          handleCreateTopic,
	wire.OpUpdateTopic:          handleUpdateTopic,
	wire.OpDeleteTopic:          handleDeleteTopic,
	wire.OpPurgeTopic:           handlePurgeTopic,
	wire.OpCreatePartitions:     handleCreatePartitions,
	wire.OpDeletePartitions:     handleDeletePartitions,
	wire.OpDeleteSegments:       handleDeleteSegments,
	wire.OpCreateConsumerGroup:  handleCreateConsumerGroup,
	wire.OpDeleteConsumerGroup:  handleDeleteConsumerGroup,
	wire.OpCreateUser:           handleCreateUser,
	wire.OpUpdateUser:           handleUpdateUser,
	wire.OpDeleteUser:           handleDeleteUser,
	wire.OpChangePassword:       handleChangePassword,
	wire.OpUpdatePermissions:    handleUpdatePermissions,
	wire.OpCreatePAT:            handleCreatePAT,
	wire.OpDeletePAT:            handleDeletePAT,
	wire.OpJoinConsumerGroup:    handleJoinConsumerGroup,
	wire.OpLeaveConsumerGroup:   handleLeaveConsumerGroup,
	wire.OpSendMessages:         handleSend,
	wire.OpStoreConsumerOffset:  handleStoreConsumerOffset,
	wire.OpDeleteConsumerOffset: handleDeleteConsumerOffset,
}

// dispatch applies the request checksum, the fault-injection controls and
// the session rules of the fact sheet (§2.4, §2.5), then runs the handler.
func (b *Broker) dispatch(r *request) reply {
	if sum := r.h.RequestChecksum; !sum.IsZero() && (sum.Hi != 0 || sum.Lo != xxh3.Hash(r.body)) {
		return status(wire.ErrInvalidFormat.Code)
	}
	if rep, handled := b.controls.run(b, r); handled {
		return rep
	}
	return b.route(r)
}

func (b *Broker) route(r *request) reply {
	c := r.c
	bound, _, _, _ := c.sessionInfo()
	switch op := r.h.Operation; {
	case op == wire.OpRegister:
		return b.register(r)
	case op == wire.OpNonReplicated:
		return b.routeNonReplicated(r, bound)
	case op == wire.OpLogout:
		// Not deduplicated: a logout resets the session's request ids, and
		// a repeated logout on an unbound transport is a plain ok anyway.
		return handleLogout(b, r)
	case !bound:
		return reply{evict: wire.EvictNoSession}
	case replicated[op] == nil:
	case op.Metadata():
		h := replicated[op]
		return b.deduplicated(r, func(b *Broker, r *request) reply { return b.runGated(h, r) })
	case op.Partition():
		return b.runGated(replicated[op], r)
	}
	// Internal operations (64..68) are replica-to-replica only.
	return status(wire.ErrInvalidCommand.Code)
}

func (b *Broker) routeNonReplicated(r *request, bound bool) reply {
	switch code := r.cmd(); {
	case code == wire.CmdLoginUser || code == wire.CmdLoginWithPAT:
		return reply{evict: wire.EvictMalformedLogin}
	case !bound && code != wire.CmdPing:
		return status(wire.ErrUnauthenticated.Code)
	case !code.Known():
		return status(wire.ErrInvalidCommand.Code)
	case code == wire.CmdLogoutUser || code == wire.CmdLoginRegister || code == wire.CmdLoginRegisterWithPAT:
		return reply{} // known, no NonReplicated handler: an empty ok
	case wire.OperationFor(code) != wire.OpNonReplicated:
		return status(wire.ErrFeatureUnavailable.Code)
	}
	if h := nonReplicated[r.cmd()]; h != nil {
		return b.runGated(h, r)
	}
	return status(wire.ErrFeatureUnavailable.Code)
}

// runGated runs h after the permission gate (authz.go) lets r through.
func (b *Broker) runGated(h handler, r *request) reply {
	if rep, ok := b.gate(r); !ok {
		return rep
	}
	return h(b, r)
}

// deduplicated runs a metadata handler at most once per request id: an id
// at or below the session's watermark replays the cached reply of that id
// or answers RequestAlreadyApplied (59). Only committed replies (status 0)
// move the watermark; pre-commit denials may be retried with the same id.
func (b *Broker) deduplicated(r *request, h handler) reply {
	c := r.c
	if r.h.Request <= c.watermark {
		if c.cached != nil && c.cached.request == r.h.Request {
			return c.cached.rep
		}
		return reply{body: wire.AppendResultErr(nil, wire.ErrRequestAlreadyApplied.Code)}
	}
	rep := h(b, r)
	if rep.status == 0 && rep.evict == 0 && !rep.silent {
		b.commit.Add(1)
		c.watermark = r.h.Request
		c.cached = &cachedReply{request: r.h.Request, rep: rep}
	}
	return rep
}

// Reply helpers.

func status(code wire.Code) reply { return reply{status: code} }

// okResult is a result-framed success with payload.
func okResult(payload wire.Encodable) reply {
	b := wire.AppendResultOK(nil)
	if payload != nil {
		b = payload.AppendTo(b)
	}
	return reply{body: b}
}

// rejected is a committed business rejection: [1][0][code], status 0.
func rejected(code wire.Code) reply { return reply{body: wire.AppendResultErr(nil, code)} }

// raw is a reply whose body is the payload itself.
func raw(body []byte) reply { return reply{body: body} }

func rawOf(v wire.Encodable) reply { return reply{body: v.AppendTo(nil)} }

// codeOf maps an error to the Iggy code of its *wire.Error, or
// InvalidCommand (3) for malformed bodies and anything else.
func codeOf(err error) wire.Code {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return wire.ErrInvalidCommand.Code
}

// decode reads a request body as upstream does: bytes after the fields the
// request needs are ignored (wire.DecodeRequest), a field running past the
// body or a bad identifier is a status-3 denial.
func decode(r *request, v wire.Decodable) (reply, bool) {
	if err := wire.DecodeRequest(r.body, v); err != nil {
		r.c.b.log.Debug("undecodable request body", "conn", r.c.id, "command", r.cmd(), "err", err)
		return status(wire.ErrInvalidCommand.Code), false
	}
	return reply{}, true
}
