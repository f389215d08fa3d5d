// Package lease gives a name (a source key) to one process at a time
// among several running the same configuration against one Iggy server,
// with Iggy itself as the coordinator: no service of Ferry's own.
//
// # How it works
//
// The lease of name is the one partition of the topic "lease-<name>"
// (stream "ferry" by default; created when missing, compacted on Ferry's
// broker). Every contender joins the consumer group "ferry-lease" of that
// topic; the member the server assigns partition 0 may hold the lease.
// One topic per name keeps each lease's log to its own claims and lets a
// contender read the last one with a single poll.
//
// A member assigned partition 0 claims the lease by appending a claim
// message ({"type":"claim","holder":...,"time":...}); the claim's offset
// plus one is the holder's epoch: at least 1, totally ordered by the log
// and higher for every later holder, on any Iggy server (no group
// generation of Ferry's broker is used). Pass it to the state store
// (iggystate.Store.Claim) so that a stale holder's state writes are
// refused.
//
// A holder confirms its assignment every renew interval (a sync of the
// group, then Me: the same server session, so no reconnect in between).
// Lost closes as soon as a check says the partition is gone, the session
// changed or the member is unknown, and in any case when no check sent
// within the last hold timeout was confirmed (a timer, not the next check:
// a connection that hangs counts too). The lease then leaves the group, so
// that it cannot be assigned the partition again without claiming.
//
// A new holder claims at once only when the topic ends with a release
// directly after its claim (the last holder stopped and said so:
// Release). Otherwise the last holder may still be running until its hold
// timeout, so the new holder stays assigned (checking) for the takeover
// delay, longer than the hold timeout, before it claims. The margin
// between the two (1s by default) is the old holder's time to stop once
// its lost has closed. The first Acquire on a new topic waits the
// takeover delay too: an empty log tells nothing.
//
// # Takeover bound
//
// Defaults: renew interval 500ms, hold timeout 2s, takeover delay 3s.
// When a holder's process dies (kill -9, a crash) its kernel closes the
// connection and the server drops its membership at once; a contender
// sees the assignment at its next check and claims after the takeover
// delay: at most renew interval + takeover delay + a few round trips,
// about 3.5s (3.505s measured in TestTakeoverAfterKill). When the holder's
// machine or network goes silent instead, the server drops the membership
// only when it evicts the connection as stale: on Ferry's broker after
// 1.2 × its HeartbeatInterval (30s by default, so 36s), on another Iggy
// server after its own client heartbeat timeout; add the takeover delay.
// A holder that releases hands over within about one renew interval.
//
// # Guarantees and limits
//
// At most one holder at a time, provided the processes' clocks run at the
// same rate (not the same time) and a holder stops what the lease guards
// within takeover delay − hold timeout after its lost closes. A holder
// paused longer than that (a stopped process, a swapped-out machine) may
// resume and act before it sees lost: that is what the epoch fences in
// the state store. On Ferry's broker a member's assignment moves only
// when a member leaves or is dropped (a join never takes partition 0 from
// its holder); a server that rebalances on join makes the holder lose the
// lease to the joiner, safely (the joiner waits the takeover delay), but
// more often.
//
// Renewals are two small requests per lease per renew interval on the
// client given to New. The client is lockstep, so a client busy with
// large sends delays them: give leases a client of their own.
package lease
