package broker

// Users (codes 31-37: get_user, get_users, create_user, delete_user,
// update_user, update_permissions, change_password) are not implemented:
// the broker has one user, root (id 0), configured in Config. Each answers
// status 5 (FeatureUnavailable) as a pre-commit denial, so replicated ones
// do not consume their request id.

import "github.com/ferryhq/ferry/iggy/wire"

func handleUsersUnsupported(b *Broker, r *request) reply {
	return status(wire.ErrFeatureUnavailable.Code)
}
