// Package apitoken owns the local API token: the credential a runtime
// creates when its management API starts with no [http] api_key, so that
// the API never answers a caller who holds no credential, and the place
// where the same user's ferry commands find it without a flag.
//
// The token is 32 random bytes in hex, written to one file per API
// address in a directory only its user can enter:
//
//	$XDG_CONFIG_HOME/ferry/api/<host>_<port>.token   (default ~/.config/ferry/api/)
//
// The directory is created with mode 0700 and refused when it belongs to
// another user or others can write to it; the file is written atomically
// with mode 0600. Loopback and unspecified hosts (127.0.0.1, ::1,
// localhost, 0.0.0.0, ::) share one name, "localhost", so a runtime
// listening on 0.0.0.0:8081 and a command calling http://127.0.0.1:8081
// meet at the same file. Other users of the machine cannot read the file,
// so they cannot use the API; the runtime removes the file when the API
// stops, and a new start writes a new token.
package apitoken
