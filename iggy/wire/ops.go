package wire

import "fmt"

// Command is an Iggy command code (ping = 1, send_messages = 101, ...).
// Replicated commands do not travel on the wire: their Operation does.
type Command uint32

// Command codes of protocol 0.11.
const (
	CmdPing                 Command = 1
	CmdGetStats             Command = 10
	CmdGetSnapshot          Command = 11
	CmdGetClusterMetadata   Command = 12
	CmdDescribeOptions      Command = 13
	CmdGetMe                Command = 20
	CmdGetClient            Command = 21
	CmdGetClients           Command = 22
	CmdGetUser              Command = 31
	CmdGetUsers             Command = 32
	CmdCreateUser           Command = 33
	CmdDeleteUser           Command = 34
	CmdUpdateUser           Command = 35
	CmdUpdatePermissions    Command = 36
	CmdChangePassword       Command = 37
	CmdLoginUser            Command = 38 // legacy; evicted as MalformedLogin
	CmdLogoutUser           Command = 39
	CmdLoginRegister        Command = 40
	CmdGetPATs              Command = 41
	CmdCreatePAT            Command = 42
	CmdDeletePAT            Command = 43
	CmdLoginWithPAT         Command = 44 // legacy; evicted as MalformedLogin
	CmdLoginRegisterWithPAT Command = 45
	CmdPollMessages         Command = 100
	CmdSendMessages         Command = 101
	CmdFlushUnsavedBuffer   Command = 102
	CmdGetConsumerOffset    Command = 120
	CmdStoreConsumerOffset  Command = 121
	CmdDeleteConsumerOffset Command = 122
	CmdGetStream            Command = 200
	CmdGetStreams           Command = 201
	CmdCreateStream         Command = 202
	CmdDeleteStream         Command = 203
	CmdUpdateStream         Command = 204
	CmdPurgeStream          Command = 205
	CmdGetTopic             Command = 300
	CmdGetTopics            Command = 301
	CmdCreateTopic          Command = 302
	CmdDeleteTopic          Command = 303
	CmdUpdateTopic          Command = 304
	CmdPurgeTopic           Command = 305
	CmdCreatePartitions     Command = 402
	CmdDeletePartitions     Command = 403
	CmdDeleteSegments       Command = 503
	CmdGetConsumerGroup     Command = 600
	CmdGetConsumerGroups    Command = 601
	CmdCreateConsumerGroup  Command = 602
	CmdDeleteConsumerGroup  Command = 603
	CmdJoinConsumerGroup    Command = 604
	CmdLeaveConsumerGroup   Command = 605
	CmdSyncConsumerGroup    Command = 606
)

var commandNames = map[Command]string{
	CmdPing: "ping", CmdGetStats: "get_stats", CmdGetSnapshot: "get_snapshot",
	CmdGetClusterMetadata: "get_cluster_metadata", CmdDescribeOptions: "describe_options",
	CmdGetMe: "get_me", CmdGetClient: "get_client", CmdGetClients: "get_clients",
	CmdGetUser: "get_user", CmdGetUsers: "get_users", CmdCreateUser: "create_user",
	CmdDeleteUser: "delete_user", CmdUpdateUser: "update_user",
	CmdUpdatePermissions: "update_permissions", CmdChangePassword: "change_password",
	CmdLoginUser: "login_user", CmdLogoutUser: "logout_user", CmdLoginRegister: "login_register",
	CmdGetPATs: "get_personal_access_tokens", CmdCreatePAT: "create_personal_access_token",
	CmdDeletePAT: "delete_personal_access_token", CmdLoginWithPAT: "login_with_personal_access_token",
	CmdLoginRegisterWithPAT: "login_register_with_personal_access_token",
	CmdPollMessages:         "poll_messages", CmdSendMessages: "send_messages",
	CmdFlushUnsavedBuffer: "flush_unsaved_buffer", CmdGetConsumerOffset: "get_consumer_offset",
	CmdStoreConsumerOffset: "store_consumer_offset", CmdDeleteConsumerOffset: "delete_consumer_offset",
	CmdGetStream: "get_stream", CmdGetStreams: "get_streams", CmdCreateStream: "create_stream",
	CmdDeleteStream: "delete_stream", CmdUpdateStream: "update_stream", CmdPurgeStream: "purge_stream",
	CmdGetTopic: "get_topic", CmdGetTopics: "get_topics", CmdCreateTopic: "create_topic",
	CmdDeleteTopic: "delete_topic", CmdUpdateTopic: "update_topic", CmdPurgeTopic: "purge_topic",
	CmdCreatePartitions: "create_partitions", CmdDeletePartitions: "delete_partitions",
	CmdDeleteSegments: "delete_segments", CmdGetConsumerGroup: "get_consumer_group",
	CmdGetConsumerGroups: "get_consumer_groups", CmdCreateConsumerGroup: "create_consumer_group",
	CmdDeleteConsumerGroup: "delete_consumer_group", CmdJoinConsumerGroup: "join_consumer_group",
	CmdLeaveConsumerGroup: "leave_consumer_group", CmdSyncConsumerGroup: "sync_consumer_group",
}

// String returns the upstream snake_case name, or "command N".
func (c Command) String() string {
	if n, ok := commandNames[c]; ok {
		return n
	}
	return fmt.Sprintf("command %d", uint32(c))
}

// Known reports whether the server side of protocol 0.11 defines c.
func (c Command) Known() bool { _, ok := commandNames[c]; return ok }

// Operation is the operation byte of a request or reply header. It names
// the consensus plane a request goes through and, for replicated requests,
// the command itself.
type Operation uint8

// Operations of protocol 0.11.
const (
	OpReserved                        Operation = 0
	OpRegister                        Operation = 1
	OpNonReplicated                   Operation = 2
	OpLogout                          Operation = 3
	OpCreateTopicWithAssignments      Operation = 64
	OpCreatePartitionsWithAssignments Operation = 65
	OpRemoveConsumerGroupMember       Operation = 66
	OpCompleteGroupRevocation         Operation = 67
	OpTruncatePartition               Operation = 68
	OpCreateStream                    Operation = 128
	OpUpdateStream                    Operation = 129
	OpDeleteStream                    Operation = 130
	OpPurgeStream                     Operation = 131
	OpCreateTopic                     Operation = 132
	OpUpdateTopic                     Operation = 133
	OpDeleteTopic                     Operation = 134
	OpPurgeTopic                      Operation = 135
	OpCreatePartitions                Operation = 136
	OpDeletePartitions                Operation = 137
	OpDeleteSegments                  Operation = 138
	OpCreateConsumerGroup             Operation = 139
	OpDeleteConsumerGroup             Operation = 140
	OpCreateUser                      Operation = 141
	OpUpdateUser                      Operation = 142
	OpDeleteUser                      Operation = 143
	OpChangePassword                  Operation = 144
	OpUpdatePermissions               Operation = 145
	OpCreatePAT                       Operation = 146
	OpDeletePAT                       Operation = 147
	OpJoinConsumerGroup               Operation = 148
	OpLeaveConsumerGroup              Operation = 149
	OpSendMessages                    Operation = 160
	OpStoreConsumerOffset             Operation = 161
	OpDeleteConsumerOffset            Operation = 162
)

var opToCmd = map[Operation]Command{
	OpRegister: CmdLoginRegister, OpLogout: CmdLogoutUser,
	OpCreateStream: CmdCreateStream, OpUpdateStream: CmdUpdateStream,
	OpDeleteStream: CmdDeleteStream, OpPurgeStream: CmdPurgeStream,
	OpCreateTopic: CmdCreateTopic, OpUpdateTopic: CmdUpdateTopic,
	OpDeleteTopic: CmdDeleteTopic, OpPurgeTopic: CmdPurgeTopic,
	OpCreatePartitions: CmdCreatePartitions, OpDeletePartitions: CmdDeletePartitions,
	OpDeleteSegments:      CmdDeleteSegments,
	OpCreateConsumerGroup: CmdCreateConsumerGroup, OpDeleteConsumerGroup: CmdDeleteConsumerGroup,
	OpCreateUser: CmdCreateUser, OpUpdateUser: CmdUpdateUser, OpDeleteUser: CmdDeleteUser,
	OpChangePassword: CmdChangePassword, OpUpdatePermissions: CmdUpdatePermissions,
	OpCreatePAT: CmdCreatePAT, OpDeletePAT: CmdDeletePAT,
	OpJoinConsumerGroup: CmdJoinConsumerGroup, OpLeaveConsumerGroup: CmdLeaveConsumerGroup,
	OpSendMessages: CmdSendMessages, OpStoreConsumerOffset: CmdStoreConsumerOffset,
	OpDeleteConsumerOffset: CmdDeleteConsumerOffset,
}

var cmdToOp = func() map[Command]Operation {
	m := make(map[Command]Operation, len(opToCmd)+1)
	for op, c := range opToCmd {
		m[c] = op
	}
	m[CmdLoginRegisterWithPAT] = OpRegister
	return m
}()

// OperationFor returns the operation a request for c travels with:
// its replicated operation, or OpNonReplicated (with c at header offset 196).
func OperationFor(c Command) Operation {
	if op, ok := cmdToOp[c]; ok {
		return op
	}
	return OpNonReplicated
}

// CommandFor returns the command a replicated operation stands for.
// For OpNonReplicated and undefined operations it reports false.
func CommandFor(op Operation) (Command, bool) {
	c, ok := opToCmd[op]
	return c, ok
}

// Valid reports whether op is a defined discriminant (1–3, 64–68, 128–149, 160–162).
func (op Operation) Valid() bool {
	switch {
	case op >= 1 && op <= 3, op >= 64 && op <= 68, op >= 128 && op <= 149, op >= 160 && op <= 162:
		return true
	}
	return false
}

// Metadata reports whether op goes through the metadata plane and so
// consumes a request id (Logout, DeleteSegments and 128..149).
func (op Operation) Metadata() bool {
	return op == OpLogout || (op >= 128 && op <= 149)
}

// Partition reports whether op is a partition-plane operation (160..162).
func (op Operation) Partition() bool { return op >= 160 && op <= 162 }

// ResultFramed reports whether a reply to op starts with a result section.
// Register is framed when its body is not empty; callers check that.
func (op Operation) ResultFramed() bool {
	switch {
	case op == OpRegister, op == OpStoreConsumerOffset, op == OpDeleteConsumerOffset:
		return true
	case op >= 64 && op <= 68:
		return true
	case op >= 128 && op <= 149 && op != OpDeleteSegments:
		return true
	}
	return false
}

func (op Operation) String() string {
	if c, ok := opToCmd[op]; ok {
		return fmt.Sprintf("op %d (%s)", uint8(op), c)
	}
	switch op {
	case OpNonReplicated:
		return "op 2 (non-replicated)"
	case OpTruncatePartition:
		return "op 68 (truncate_partition)"
	}
	return fmt.Sprintf("op %d", uint8(op))
}
